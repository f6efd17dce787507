"""A small DQN on CartPole laid out as stable-baselines3 lays out its policies: the online
Q-network and its target copy are children of one policy module, the optimizer holds the
online one only, and the target follows it by Polyak averaging (no optimizer, no gradient).

--forget-no-grad computes the target's forward with autograd on: the classic slip, whose
gradients reach the target's parameters and pile up there (nothing zeroes them).
"""

import argparse
import random

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=800)
parser.add_argument("--forget-no-grad", action="store_true")
args = parser.parse_args()

random.seed(0)
np.random.seed(0)
torch.manual_seed(0)


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 2))


class DQNPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.q_net = mlp()
        self.q_net_target = mlp()
        self.q_net_target.load_state_dict(self.q_net.state_dict())

    def polyak(self, tau: float) -> None:
        with torch.no_grad():
            for p, t in zip(self.q_net.parameters(), self.q_net_target.parameters(), strict=True):
                t.mul_(1 - tau).add_(p, alpha=tau)


policy = DQNPolicy()
optimizer = torch.optim.Adam(policy.q_net.parameters(), lr=1e-3)
env = gym.make("CartPole-v1")
obs, _ = env.reset(seed=0)
memory: list[tuple] = []

for step in range(args.steps):
    eps = max(0.05, 1 - step / (0.5 * args.steps))
    if random.random() < eps:
        action = env.action_space.sample()
    else:
        with torch.no_grad():
            action = int(policy.q_net(torch.as_tensor(obs)).argmax())
    next_obs, reward, terminated, truncated, _ = env.step(action)
    memory.append((obs, action, reward, next_obs, float(terminated)))
    obs = next_obs if not (terminated or truncated) else env.reset()[0]
    if step < 100:
        continue
    batch = random.sample(memory, 32)
    columns = zip(*batch, strict=True)
    o, a, r, o2, d = (torch.as_tensor(np.array(x), dtype=torch.float32) for x in columns)
    if args.forget_no_grad:
        target = r + 0.99 * policy.q_net_target(o2).max(dim=1).values * (1 - d)
    else:
        with torch.no_grad():
            target = r + 0.99 * policy.q_net_target(o2).max(dim=1).values * (1 - d)
    q = policy.q_net(o).gather(1, a.long()[:, None]).squeeze(1)
    loss = F.smooth_l1_loss(q, target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    policy.polyak(0.01)
