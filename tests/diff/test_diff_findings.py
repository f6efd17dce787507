"""The diff's findings (gradscope/diff/findings.py) on two small models: a parameter whose
shape the port got wrong is named, not copied."""

from __future__ import annotations

import torch
from torch import nn

from gradscope.diff import diff

X = torch.randn(5, 4, generator=torch.Generator().manual_seed(0))


def _mlp(hidden: int) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, hidden), nn.ReLU(), nn.Linear(hidden, 2))


def test_a_port_built_with_another_hidden_size_is_a_shape_mismatch():
    result = diff(_mlp(8), _mlp(6), X)
    mismatched = {f.subject for f in result.findings if f.rule == "GS605"}
    assert mismatched == {"0.weight", "0.bias", "2.weight"}
