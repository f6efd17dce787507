"""GS411's retired case (a tensor whose only optimizer stopped while the backward kept
reaching it) where the tensor sits above what trains on: TTT trains an encoder with a
rotation head, then adapts only the encoder at test time through that head. The backward
must pass through the head to reach the encoder, and only the head's own gradients are
extra: information. The look-alike, a head-only optimizer over an encoder left unfrozen
(differentiated for nothing), is still a warning."""

from __future__ import annotations

from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn

from gradscope import api
from gradscope.findings import Severity
from gradscope.watcher.passed_through import below_each_leaf, owners


def _ttt(adapt: str) -> dict[str, Severity]:
    torch.manual_seed(0)
    encoder = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
    rotation_head = nn.Linear(16, 4)
    joint = torch.optim.SGD([*encoder.parameters(), *rotation_head.parameters()], lr=0.1)
    adapted = encoder if adapt == "encoder" else rotation_head
    test_time = torch.optim.SGD(adapted.parameters(), lr=0.01)
    with api.watch() as w:
        for opt, steps in ((joint, 4), (test_time, 12)):
            for _ in range(steps):
                x, y = torch.randn(16, 8), torch.randint(0, 4, (16,))
                opt.zero_grad()
                F.cross_entropy(rotation_head(encoder(x)), y).backward()
                opt.step()
    return {f.subject: f.severity for f in w.report.findings if f.rule == "GS411"}


def test_a_head_kept_fixed_above_the_adapted_encoder_is_information():
    found = _ttt("encoder")
    assert found and all(name.startswith("Linear") for name in found), found
    assert set(found.values()) == {Severity.INFO}, found


def test_an_encoder_left_unfrozen_below_a_head_only_optimizer_is_a_warning():
    found = _ttt("head")
    assert found and Severity.WARNING in found.values(), found
    assert Severity.INFO not in found.values(), found


def test_the_walk_reads_a_weight_through_its_transpose_and_not_below_its_bias():
    encoder, head = nn.Linear(3, 3), nn.Linear(3, 2)
    held = owners(
        [
            SimpleNamespace(param_groups=[{"params": [*head.parameters()]}]),  # bit 0b01
            SimpleNamespace(param_groups=[{"params": [*encoder.parameters()]}]),  # bit 0b10
        ]
    )
    below = below_each_leaf([head(encoder(torch.randn(4, 3))).sum()], held)
    assert below is not None
    assert below[id(head.weight)] == below[id(head.bias)] == 0b10
    assert below.get(id(encoder.weight), 0) == below.get(id(encoder.bias), 0) == 0
