"""GS475: an EMA update with its arguments swapped. lightly's
`update_momentum(model, model_ema, m)` (lightly/models/utils.py) writes
`model_ema.data = model_ema.data * m + model.data * (1 - m)`: given the momentum copy
first, as its BYOL, DINO and MoCo examples never do, it writes the trained model toward
its frozen starting copy, and the copy, whose outputs are the targets, never moves. The
look-alikes stay silent: the same update the right way round, a target network synced
whole every other step, CoTTA's stochastic restore of the student from a frozen source
copy beside an EMA teacher that follows it, and a fixed reference copy nobody writes."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import gradscope
from gradscope.findings import Finding


def update_momentum(model: nn.Module, model_ema: nn.Module, m: float) -> None:
    """lightly.models.utils.update_momentum, as written there."""
    for ema, p in zip(model_ema.parameters(), model.parameters(), strict=True):
        ema.data = ema.data * m + p.data * (1.0 - m)


def _byol(update: str) -> list[Finding]:
    torch.manual_seed(0)
    online = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4))
    anchor = copy.deepcopy(online).requires_grad_(False)  # CoTTA's source copy
    model = nn.ModuleDict(
        {
            "online": online,
            "target": copy.deepcopy(online).requires_grad_(False),
            "predictor": nn.Linear(4, 4),
            "anchor": anchor,
        }
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.05)  # lightly hands it every parameter
    with gradscope.watch() as w:
        for step in range(6):
            x = torch.randn(16, 4)
            if update == "swapped":
                update_momentum(model["target"], model["online"], 0.99)
            elif update == "swapped-by-hand":  # MoCo's reference EMA, the two swapped
                for k, q in zip(online.parameters(), model["target"].parameters(), strict=True):
                    k.data.mul_(0.99).add_(q.data, alpha=0.01)
            elif update in ("ema", "cotta"):
                update_momentum(model["online"], model["target"], 0.99)
            elif update == "synced" and step % 2 == 0:
                model["target"].load_state_dict(model["online"].state_dict())
            if update == "cotta":
                with torch.no_grad():
                    for p, source in zip(online.parameters(), anchor.parameters(), strict=True):
                        keep = (torch.rand(p.shape) < 0.3).float()
                        p.data = source * keep + p * (1.0 - keep)
            pred = model["predictor"](online(x + 0.1 * torch.randn_like(x)))
            with torch.no_grad():
                z = model["target"](x) + (anchor(x) if update == "reference" else 0.0)
            loss = -F.cosine_similarity(pred, z).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return w.report.findings


@pytest.mark.parametrize("update", ["swapped", "swapped-by-hand"])
def test_an_ema_update_with_its_arguments_swapped_is_named(update):
    found = [f for f in _byol(update) if f.rule == "GS475"]
    assert [f.subject for f in found] == ["online"], found
    assert "never changed" in found[0].message and "swapped" in found[0].message
    assert "update_momentum(online, target, m)" in found[0].advice


@pytest.mark.parametrize("update", ["ema", "synced", "cotta", "reference"])
def test_the_right_way_round_and_its_look_alikes_are_silent(update):
    assert "GS475" not in [f.rule for f in _byol(update)]
