"""A2C on CartPole as stable-baselines3 sets it up (tanh MLPs, RMSprop at lr 7e-4, clip 0.5);
argv[1]: the learning rate (7e-2, 100× too high, saturates the tanh units)."""

import sys

import gymnasium as gym
import torch
from torch import nn

torch.manual_seed(0)
lr = float(sys.argv[1]) if len(sys.argv) > 1 else 7e-4
env = gym.make("CartPole-v1")


def mlp(out: int) -> nn.Module:
    hidden = [nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh()]
    return nn.Sequential(*hidden, nn.Linear(64, out))


actor, critic = mlp(2), mlp(1)
params = list(actor.parameters()) + list(critic.parameters())
opt = torch.optim.RMSprop(params, lr=lr, alpha=0.99, eps=1e-5)
obs, _ = env.reset(seed=0)
for _update in range(250):
    logps, values, rewards, dones, ents = [], [], [], [], []
    for _ in range(5):
        o = torch.as_tensor(obs, dtype=torch.float32)
        dist = torch.distributions.Categorical(logits=actor(o))
        a = dist.sample()
        obs, r, term, trunc, _ = env.step(a.item())
        logps.append(dist.log_prob(a))
        ents.append(dist.entropy())
        values.append(critic(o).squeeze())
        rewards.append(r)
        dones.append(term or trunc)
        if term or trunc:
            obs, _ = env.reset()
    with torch.no_grad():
        ret = critic(torch.as_tensor(obs, dtype=torch.float32)).squeeze() * (not dones[-1])
    returns = []
    for r, d in zip(reversed(rewards), reversed(dones), strict=True):
        ret = r + 0.99 * ret * (not d)
        returns.insert(0, ret)
    target = torch.stack([torch.as_tensor(x, dtype=torch.float32) for x in returns])
    value, logp = torch.stack(values), torch.stack(logps)
    adv = (target - value).detach()
    entropy = torch.stack(ents).mean()
    loss = -(adv * logp).mean() + 0.5 * (target - value).pow(2).mean() - 0.01 * entropy
    opt.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(params, 0.5)
    opt.step()
