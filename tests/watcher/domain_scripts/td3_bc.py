"""TD3+BC (Fujimoto & Gu, 2021) on a synthetic offline dataset, as CORL's single file writes
it: twin critics and their Polyak targets, the actor stepped every other critic step on
-lambda * Q(s, pi(s)).mean() + mse(pi(s), a) with lambda = alpha / |Q|.mean().detach().
Bug `attached`: the normaliser not detached, so the Q term is scale-free (its gradient 0)."""

import copy
import sys

import torch
import torch.nn.functional as F
from torch import nn

MODE = sys.argv[1] if len(sys.argv) > 1 else "healthy"
STEPS = int(sys.argv[2]) if len(sys.argv) > 2 else 6
torch.manual_seed(0)
S, A, N = 4, 2, 256
obs, act = torch.randn(N, S), torch.tanh(torch.randn(N, A))
rew, nxt, done = 1.0 + (obs[:, :A] * act).sum(1), obs + 0.1 * torch.randn(N, S), torch.zeros(N)


def mlp(i, o):
    return nn.Sequential(nn.Linear(i, 16), nn.ReLU(), nn.Linear(16, o))


actor, critics = mlp(S, A), nn.ModuleList([mlp(S + A, 1), mlp(S + A, 1)])
actor_t, critics_t = copy.deepcopy(actor), copy.deepcopy(critics)
a_opt = torch.optim.Adam(actor.parameters(), 3e-4)
c_opt = torch.optim.Adam(critics.parameters(), 3e-4)


def q(nets, o, a, k):
    return nets[k](torch.cat([o, a], -1)).squeeze(-1)


for it in range(STEPS):
    i = torch.randint(0, N, (32,))
    o, a, r, o2, d = obs[i], act[i], rew[i], nxt[i], done[i]
    with torch.no_grad():
        noise = (0.2 * torch.randn_like(a)).clamp(-0.5, 0.5)
        a2 = (torch.tanh(actor_t(o2)) + noise).clamp(-1, 1)
        y = r + 0.99 * (1 - d) * torch.min(q(critics_t, o2, a2, 0), q(critics_t, o2, a2, 1))
    c_loss = F.mse_loss(q(critics, o, a, 0), y) + F.mse_loss(q(critics, o, a, 1), y)
    c_opt.zero_grad()
    c_loss.backward()
    c_opt.step()
    if it % 2 == 0:
        pi = torch.tanh(actor(o))
        qv = q(critics, o, pi, 0)
        scale = qv.abs().mean() if MODE == "attached" else qv.abs().mean().detach()
        a_loss = -(2.5 / scale) * qv.mean() + F.mse_loss(pi, a)
        a_opt.zero_grad()
        a_loss.backward()
        a_opt.step()
        with torch.no_grad():
            for net, tgt in ((critics, critics_t), (actor, actor_t)):
                for p, tp in zip(net.parameters(), tgt.parameters(), strict=True):
                    tp.mul_(0.995).add_(0.005 * p)
