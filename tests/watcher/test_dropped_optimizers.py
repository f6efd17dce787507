"""Optimizers the script drops (a task's inner SGD in a meta-learning loop, a federated
client's): their last step leaves an open reset, whose gradients no later backward
changes; each is measured once, not at every later backward (which made a run of N tasks
cost N² norms and keep one tensor per norm)."""

from __future__ import annotations

import torch
from torch import nn

from gradscope.watcher import resets
from tests.watcher.test_discover_scans import _reptile


def test_a_dropped_optimizers_unchanged_gradients_are_measured_once(monkeypatch):
    measured: list[int] = []
    real = resets.norms

    def counted(grads):
        measured.append(len(grads))
        return real(grads)

    monkeypatch.setattr(resets, "norms", counted)
    torch.manual_seed(0)
    run = _reptile(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)), 12)
    assert len(run.steps) == 12 * 3  # two inner steps a task, and the outer one
    assert len(measured) <= 2 * 12  # 22 here; at every later backward each: 154
