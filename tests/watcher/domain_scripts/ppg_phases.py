"""Phasic Policy Gradient (Cobbe et al.): PPO policy phases, each with its own value
network's step, then an auxiliary phase that distils the returns into the policy
network's auxiliary value head under a KL to the policy as it was before the phase,
with its own Adam over the same network. Bug `kl-current`: the KL taken to the current
policy, which is zero by construction and leaves the policy free to drift."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "healthy"
OBS, ACTIONS, BATCH = 4, 3, 64
W = torch.randn(OBS, ACTIONS)


class Policy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(OBS, 32), nn.Tanh())
        self.pi = nn.Linear(32, ACTIONS)
        self.aux = nn.Linear(32, 1)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = self.body(obs)
        return self.pi(z), self.aux(z).squeeze(-1)


def ppo_step(obs: torch.Tensor, act, old, reward) -> None:
    logits, _ = policy(obs)
    adv = (reward - value(obs).squeeze(-1)).detach()
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    ratio = torch.exp(F.log_softmax(logits, -1).gather(1, act[:, None]).squeeze(1) - old)
    loss = -torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean()
    opt_pi.zero_grad()
    loss.backward()
    opt_pi.step()
    v_loss = 0.5 * ((value(obs).squeeze(-1) - reward) ** 2).mean()
    opt_v.zero_grad()
    v_loss.backward()
    opt_v.step()


def aux_step(obs: torch.Tensor, reward: torch.Tensor, old_logits: torch.Tensor) -> None:
    logits, aux = policy(obs)
    anchor = logits if MODE == "kl-current" else old_logits
    kl = F.kl_div(
        F.log_softmax(logits, -1), F.log_softmax(anchor, -1), log_target=True, reduction="batchmean"
    )
    loss = 0.5 * ((aux - reward) ** 2).mean() + kl
    opt_aux.zero_grad()
    loss.backward()
    opt_aux.step()


policy = Policy()
value = nn.Sequential(nn.Linear(OBS, 32), nn.Tanh(), nn.Linear(32, 1))
opt_pi = torch.optim.Adam(policy.parameters(), lr=1e-3)
opt_aux = torch.optim.Adam(policy.parameters(), lr=1e-3)
opt_v = torch.optim.Adam(value.parameters(), lr=1e-3)
for phase in range(3):
    seen = []
    for _ in range(3):
        obs = torch.randn(BATCH, OBS)
        with torch.no_grad():
            logits, _ = policy(obs)
            act = torch.distributions.Categorical(logits=logits).sample()
            old = F.log_softmax(logits, -1).gather(1, act[:, None]).squeeze(1)
        reward = (act == (obs @ W).argmax(-1)).float()
        seen.append((obs, reward))
        for _ in range(2):
            ppo_step(obs, act, old, reward)
    obs, reward = torch.cat([s[0] for s in seen]), torch.cat([s[1] for s in seen])
    with torch.no_grad():
        old_logits, _ = policy(obs)
    for _ in range(3):
        aux_step(obs, reward, old_logits)
    print(phase, "reward", reward.mean().item())
