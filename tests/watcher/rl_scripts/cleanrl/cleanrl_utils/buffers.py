"""A small stand-in for cleanrl_utils.buffers.ReplayBuffer (itself adapted from
stable-baselines3, 600 lines): the same constructor, add() and sample() for one
environment, uniform sampling. Written for these tests, not part of CleanRL."""

from typing import NamedTuple

import numpy as np
import torch


class ReplayBufferSamples(NamedTuple):
    observations: torch.Tensor
    actions: torch.Tensor
    next_observations: torch.Tensor
    dones: torch.Tensor
    rewards: torch.Tensor


class ReplayBuffer:
    def __init__(self, buffer_size, observation_space, action_space, device="cpu", n_envs=1,
                 handle_timeout_termination=True):
        self.size, self.device, self.pos, self.full = buffer_size, device, 0, False
        obs_shape = observation_space.shape
        act_dim = int(np.prod(action_space.shape)) or 1
        self.discrete = not action_space.shape
        self.obs = np.zeros((buffer_size, *obs_shape), dtype=np.float32)
        self.next_obs = np.zeros((buffer_size, *obs_shape), dtype=np.float32)
        self.actions = np.zeros((buffer_size, act_dim),
                                dtype=np.int64 if self.discrete else np.float32)
        self.rewards = np.zeros((buffer_size, 1), dtype=np.float32)
        self.dones = np.zeros((buffer_size, 1), dtype=np.float32)

    def add(self, obs, next_obs, action, reward, done, infos):
        i = self.pos
        self.obs[i], self.next_obs[i] = obs[0], next_obs[0]
        self.actions[i] = np.asarray(action).reshape(-1)
        self.rewards[i], self.dones[i] = reward[0], done[0]
        self.pos = (i + 1) % self.size
        self.full = self.full or self.pos == 0

    def sample(self, batch_size):
        idx = np.random.randint(0, self.size if self.full else self.pos, size=batch_size)

        def t(a):
            return torch.as_tensor(a[idx], device=self.device)

        return ReplayBufferSamples(t(self.obs), t(self.actions), t(self.next_obs), t(self.dones),
                                   t(self.rewards))
