"""Two optimizers stepping on one backward call (Muon beside AdamW, SparseAdam beside Adam)
each apply its gradients: each step has the backward call and its loss (the second got
none, and its loss read "- → -"). Muon's weight decay is decoupled, as torch applies it
(w ← w(1 - lr·wd)), not L2 against the gradient: GS420 read its stock 0.1 as erasing the
weights."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import gradscope
from gradscope.findings import Severity
from gradscope.watcher.optim_settings import group_settings
from tests.watcher.watch_scripts import watched


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["muon", "sparse"])
def test_each_optimizer_on_one_backward_has_its_loss(mode):
    report = watched("two_optimizers_one_backward.py", mode)
    data = report.to_dict()
    per = data["summary"]["per_optimizer"]
    assert [p["steps"] for p in per] == [30, 30], per
    by_step: dict[int, list] = {}
    for row in data["steps"]:
        by_step.setdefault(row["optimizer"], []).append((row["loss"], row["backward_calls"]))
    assert by_step[0] == by_step[1]  # the same backward call, the same loss
    assert all(loss is not None and calls == 1 for loss, calls in by_step[1])
    assert [f for f in report.findings if f.severity >= Severity.WARNING] == []


@pytest.mark.slow
def test_the_micro_batches_of_one_backward_window_are_estimated_once():
    """With 2 micro-batches a step, both optimizers apply both calls; the noise scale's
    micro-batch norms go with the first step only (one estimate per window)."""
    rows = watched("two_optimizers_one_backward.py", "muon", "30", "2").to_dict()["steps"]
    first = [r for r in rows if r["optimizer"] == 0]
    second = [r for r in rows if r["optimizer"] == 1]
    assert {r["backward_calls"] for r in first + second} == {2}
    assert [r["loss"] for r in first] == [r["loss"] for r in second]
    assert all(r["micro_batches"] == 2 for r in first[1:])
    assert all(r["micro_batches"] == 0 for r in second)


def test_muons_weight_decay_is_decoupled():
    w = torch.nn.Parameter(torch.randn(4, 4))
    muon = torch.optim.Muon([w], lr=0.02)
    assert group_settings(muon, muon.param_groups[0]).decoupled
    sgd = torch.optim.SGD([w], lr=0.1, weight_decay=1e-4)
    assert not group_settings(sgd, sgd.param_groups[0]).decoupled


def test_an_optimizer_per_parameter_on_one_backward_each_has_its_loss():
    """Pyro's PyroOptim builds one torch optimizer per parameter and steps them all after
    each SVI backward: the third and later had no loss (only the first two shared it)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    opts = [torch.optim.Adam([p], lr=1e-2) for p in model.parameters()]
    x, y = torch.randn(32, 4), torch.randn(32, 1)
    with gradscope.watch() as w:
        for _ in range(5):
            for opt in opts:
                opt.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            for opt in opts:
                opt.step()
    rows = w.report.to_dict()["steps"]
    assert len(rows) == 20
    for step in range(5):
        losses = {r["loss"] for r in rows[4 * step : 4 * step + 4]}
        assert len(losses) == 1 and None not in losses, rows
        assert {r["backward_calls"] for r in rows[4 * step : 4 * step + 4]} == {1}
