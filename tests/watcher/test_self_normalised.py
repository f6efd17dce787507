"""GS479: a loss term divided by an attached magnitude of itself, read off the loss's
graph: TD3+BC's Q term over |Q|.mean() with the detach forgotten is scale-free, and its
gradient into the actor is 0 where the batch's Q values share a sign. The recipe as
written (the normaliser detached) stays silent."""

from __future__ import annotations

import torch

from gradscope.watcher.self_scaled import find
from tests.watcher.watch_scripts import domain_watched

SCRIPT = "td3_bc.py"


def _gs479(mode: str) -> list:
    return [f for f in domain_watched(SCRIPT, mode).findings if f.rule == "GS479"]


def test_td3_bc_normaliser_left_attached_is_named():
    (found,) = _gs479("attached")
    assert found.rule == "GS479" and found.severity.name == "WARNING"
    assert "optimizer 1" in found.message and "mean of abs" in found.message
    assert ".detach()" in found.advice


def test_td3_bc_as_written_and_an_advantage_normalised_by_its_spread_are_not_this():
    assert _gs479("healthy") == []
    x = torch.randn(8, requires_grad=True)
    adv = 3 * x
    assert find((((adv - adv.mean()) / adv.std()) * x).mean().grad_fn) is None
    assert find((adv.mean() / adv.norm().detach()).grad_fn) is None
    assert find((adv.sum() / adv.abs().sum()).grad_fn) is not None
    assert find((-(2.5 / adv.abs().mean()) * adv).mean().grad_fn) is not None
    cosine = (adv / adv.norm() * x / x.norm()).sum()
    assert find(((adv / adv.norm() - 1.0) ** 2).mean().grad_fn) is None
    assert find(cosine.grad_fn) is None
