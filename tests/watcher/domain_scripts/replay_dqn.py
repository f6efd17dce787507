"""A Rainbow-style DQN on a chain: NoisyNet layers (factorised noise resampled every step,
learned sigmas), prioritized replay with importance-sampling weights, a double-DQN target
from a target copy. The reward sits at the chain's end, so the first steps' TD targets are
all near 0 and the loss rises when the first rewards enter the replay. Modes: `noisy`
(healthy); bug `undetached` (the TD target is computed with gradients on: the target copy's
forward is in the graph, the loss pulls the target towards the prediction)."""

import copy
import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "noisy"
S, A, GAMMA, BATCH, ENVS, STEPS = 6, 2, 0.9, 64, 32, 120


class NoisyLinear(nn.Module):
    def __init__(self, i, o, sigma0=0.5):
        super().__init__()
        bound = 1 / math.sqrt(i)
        self.i, self.o = i, o
        self.mu_w = nn.Parameter(torch.empty(o, i).uniform_(-bound, bound))
        self.sigma_w = nn.Parameter(torch.full((o, i), sigma0 * bound))
        self.mu_b = nn.Parameter(torch.empty(o).uniform_(-bound, bound))
        self.sigma_b = nn.Parameter(torch.full((o,), sigma0 * bound))
        self.register_buffer("eps_in", torch.zeros(i))
        self.register_buffer("eps_out", torch.zeros(o))

    def reset_noise(self):
        def f(x):
            return x.sign() * x.abs().sqrt()

        self.eps_in.copy_(f(torch.randn(self.i)))
        self.eps_out.copy_(f(torch.randn(self.o)))

    def forward(self, x):
        w = self.mu_w + self.sigma_w * torch.outer(self.eps_out, self.eps_in)
        return F.linear(x, w, self.mu_b + self.sigma_b * self.eps_out)


class QNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(S, 32)
        self.n1, self.n2 = NoisyLinear(32, 32), NoisyLinear(32, A)

    def forward(self, s):
        return self.n2(F.relu(self.n1(F.relu(self.fc(F.one_hot(s, S).float())))))

    def reset_noise(self):
        self.n1.reset_noise()
        self.n2.reset_noise()


def env_step(s, a):
    s2 = (s + torch.where(a == 1, 1, -1)).clamp(0, S - 1)
    done = (s2 == S - 1).float()
    return torch.where(done > 0, torch.zeros_like(s2), s2), done, done


q = QNet()
target = copy.deepcopy(q)
opt = torch.optim.Adam(q.parameters(), lr=1e-3)
size = ENVS * STEPS
obs, act, nxt = (torch.zeros(size, dtype=torch.long) for _ in range(3))
rew, dones, prio = torch.zeros(size), torch.zeros(size), torch.zeros(size)
s, n = torch.zeros(ENVS, dtype=torch.long), 0
for step in range(STEPS):
    q.reset_noise()
    with torch.no_grad():
        a = q(s).argmax(-1)  # exploration by the noise alone
    s2, r, d = env_step(s, a)
    sl = slice(n, n + ENVS)
    obs[sl], act[sl], rew[sl], nxt[sl], dones[sl] = s, a, r, s2, d
    prio[sl] = prio[:n].max() if n else 1.0
    n, s = n + ENVS, s2
    p = prio[:n] ** 0.6
    p = p / p.sum()
    i = torch.multinomial(p, BATCH, replacement=True)
    w = (n * p[i]) ** -(0.4 + 0.6 * step / STEPS)
    w = w / w.max()
    with torch.set_grad_enabled(MODE == "undetached"):
        best = q(nxt[i]).argmax(-1)
        y = rew[i] + GAMMA * (1 - dones[i]) * target(nxt[i]).gather(1, best[:, None]).squeeze(1)
    qa = q(obs[i]).gather(1, act[i, None]).squeeze(1)
    loss = (w * F.smooth_l1_loss(qa, y, reduction="none")).mean()
    opt.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(q.parameters(), 10)
    opt.step()
    prio[i] = (qa - y).detach().abs() + 1e-6
    if step % 50 == 0:
        target.load_state_dict(q.state_dict())
print("greedy", q(torch.arange(S)).argmax(-1).tolist())
