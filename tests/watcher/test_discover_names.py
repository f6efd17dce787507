"""Two models of one class are named by the optimizer's order, never by the garbage
collector's: an A2C's actor and critic (two nn.Sequential) must keep their names from run
to run, as findings and configs spell them."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from gradscope.watcher import discover


def _mlp(out: int) -> nn.Module:
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, out))


@pytest.mark.parametrize("actor_first", [True, False])
def test_two_models_of_one_class_are_named_in_the_optimizers_order(actor_first):
    critic, actor = _mlp(1), _mlp(2)  # the critic is built first
    first, second = (actor, critic) if actor_first else (critic, actor)
    opt = torch.optim.SGD([*first.parameters(), *second.parameters()], lr=0.1)
    tracked = discover.Tracked()
    discover.extend(tracked, [opt])
    names = dict(zip(map(id, tracked.params), tracked.names, strict=True))
    assert names[id(first[0].weight)] == "Sequential.0.weight"
    assert names[id(second[0].weight)] == "Sequential2.0.weight"


def test_an_optimizer_over_one_model_gives_no_prefix():
    model = _mlp(2)
    other = _mlp(1)  # alive, in no optimizer
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    tracked = discover.Tracked()
    discover.extend(tracked, [opt])
    assert tracked.names[:2] == ["0.weight", "0.bias"] and other is not None
