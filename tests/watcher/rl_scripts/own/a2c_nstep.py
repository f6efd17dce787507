"""A2C on CartPole written as most hand-made ones are (stable-baselines3's defaults: n-step
returns bootstrapped from the critic, RMSprop at lr 7e-4, the gradient clipped at 0.5). Each
episode end turns a bootstrapped target into a plain reward, so the value loss and its gradient
jump there by design.

Variants: --optim adam (no clip), --huber (smooth-L1 value loss), --n-steps N, --shared (one
trunk for actor and critic); bugs: --bad-batch K (the rewards of update K scaled by 1e4: one
corrupted batch), --nan-at K (a NaN reward at update K, a spike then NaN).
"""

import argparse

import gymnasium as gym
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--updates", type=int, default=250)
parser.add_argument("--n-steps", type=int, default=5)
parser.add_argument("--optim", default="rmsprop")
parser.add_argument("--lr", type=float, default=None)
parser.add_argument("--huber", action="store_true")
parser.add_argument("--shared", action="store_true")
parser.add_argument("--bad-batch", type=int, default=-1)
parser.add_argument("--nan-at", type=int, default=-1)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

torch.manual_seed(args.seed)


def mlp(out: int) -> nn.Module:
    return nn.Sequential(
        nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, out)
    )


class ActorCritic(nn.Module):
    def __init__(self, shared: bool):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(4, 64), nn.Tanh()) if shared else None
        width = 64 if shared else 4
        self.actor = nn.Linear(64, 2) if shared else mlp(2)
        self.critic = nn.Linear(width, 1) if shared else mlp(1)

    def forward(self, x):
        h = self.trunk(x) if self.trunk is not None else x
        return self.actor(h), self.critic(h).squeeze(-1)


model = ActorCritic(args.shared)
if args.optim == "adam":
    opt = torch.optim.Adam(model.parameters(), lr=args.lr or 1e-3)
else:
    opt = torch.optim.RMSprop(model.parameters(), lr=args.lr or 7e-4, alpha=0.99, eps=1e-5)
env = gym.make("CartPole-v1")
obs, _ = env.reset(seed=args.seed)
episode, returns = 0.0, []
for update in range(args.updates):
    logps, values, rewards, dones, ents = [], [], [], [], []
    for _ in range(args.n_steps):
        logits, value = model(torch.as_tensor(obs, dtype=torch.float32))
        dist = torch.distributions.Categorical(logits=logits)
        a = dist.sample()
        obs, r, term, trunc, _ = env.step(a.item())
        episode += r
        logps.append(dist.log_prob(a))
        ents.append(dist.entropy())
        values.append(value)
        rewards.append(r * (1e4 if update == args.bad_batch else 1.0))
        dones.append(term or trunc)
        if update == args.nan_at:
            rewards[-1] = float("nan")
        if term or trunc:
            obs, _ = env.reset()
            returns.append(episode)
            episode = 0.0
    with torch.no_grad():
        ret = model(torch.as_tensor(obs, dtype=torch.float32))[1] * (not dones[-1])
    targets = []
    for r, d in zip(reversed(rewards), reversed(dones), strict=True):
        ret = r + 0.99 * ret * (not d)
        targets.insert(0, ret)
    target = torch.stack([torch.as_tensor(x, dtype=torch.float32) for x in targets])
    value = torch.stack(values)
    advantage = (target - value).detach()
    critic_loss = F.smooth_l1_loss(value, target) if args.huber else (target - value).pow(2).mean()
    entropy = torch.stack(ents).mean()
    loss = -(advantage * torch.stack(logps)).mean() + 0.5 * critic_loss - 0.01 * entropy
    opt.zero_grad()
    loss.backward()
    if args.optim != "adam":
        nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    opt.step()
    if (update + 1) % 50 == 0 and returns:
        print(f"update {update + 1}: mean return {sum(returns[-10:]) / len(returns[-10:]):.1f}")
