"""A semi-supervised loss `supervised + w * consistency` whose weight never leaves 0 (a
ramp-up computed from a step that never advances), or FixMatch's unlabelled term under a
confidence mask no sample passes: the term trains nothing. GS469 says so from the loss's
graph; a ramp-up that starts at 0 and rises later, a mask that passes samples once the
model is confident, a weight never 0, and a masked mean divided by a count of 0 (a NaN, not
a weight) stay silent."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import gradscope
from gradscope.steps.meaning import LossKind, LossTerm
from gradscope.watcher import loss_graph, loss_kinds

STEPS = 110  # the loss's kind is read again at step 101


def _consistency_run(weight_at) -> dict:
    torch.manual_seed(0)
    model = nn.Linear(6, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y, u = torch.randn(8, 6), torch.randint(0, 3, (8,)), torch.randn(16, 6)
    with gradscope.watch() as w:
        for step in range(STEPS):
            with torch.no_grad():
                target = model(u).softmax(-1)
            noisy = model(u + 0.1 * torch.randn_like(u)).softmax(-1)
            consistency = F.mse_loss(noisy, target)
            loss = F.cross_entropy(model(x), y) + weight_at(step) * consistency
            opt.zero_grad()
            loss.backward()
            opt.step()
    return {f.rule: f for f in w.report.findings}


def test_a_weight_that_never_ramps_up_is_named():
    found = _consistency_run(lambda step: 10.0 * min(0 / 50, 1.0))["GS469"]
    assert "mse (mean)" in found.message and "multiplied by 0" in found.message
    assert "ramp-up" in found.advice


def test_a_ramp_up_from_zero_is_silent():
    assert "GS469" not in _consistency_run(lambda step: 10.0 * min(step // 50 / 2, 1.0))


def test_a_weight_never_zero_is_silent():
    assert "GS469" not in _consistency_run(lambda step: 1.0)


def test_a_zero_weight_takes_a_later_step_s_weight():
    sup = LossTerm("cross_entropy", "mean", 1.0)
    first = LossKind((sup, LossTerm("mse", "mean", 0.0)))
    later = LossKind((sup, LossTerm("mse", "mean", 2.5)))
    assert [t.factor for t in loss_kinds.union(first, later).terms] == [1.0, 2.5]
    assert [t.factor for t in loss_kinds.union(first, first).terms] == [1.0, 0.0]


def _pseudo_label_run(threshold: float) -> dict:
    torch.manual_seed(0)
    model = nn.Linear(6, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    x, u = torch.randn(8, 6), torch.randn(16, 6)
    y = x[:, :3].argmax(1)
    with gradscope.watch() as w:
        for _ in range(STEPS):
            with torch.no_grad():
                confidence, pseudo = model(u).softmax(-1).max(-1)
            mask = confidence.ge(threshold).float()
            unlabelled = F.cross_entropy(
                model(u + 0.1 * torch.randn_like(u)), pseudo, reduction="none"
            )
            loss = F.cross_entropy(model(x), y) + (unlabelled * mask).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return {f.rule: f for f in w.report.findings}


def test_a_confidence_mask_nothing_passes_is_named():
    found = _pseudo_label_run(95.0)["GS469"]  # a percentage where a probability belongs
    assert "cross-entropy" in found.message and "confidence mask" in found.advice


def test_a_mask_that_passes_samples_later_is_silent():
    assert "GS469" not in _pseudo_label_run(0.95)  # none pass at the first steps, some later


def test_a_count_of_zero_is_no_weight_of_zero():
    x = torch.randn(4, 3, requires_grad=True)
    mask = torch.zeros(4)
    per_sample = F.cross_entropy(x, torch.zeros(4, dtype=torch.long), reduction="none")
    for divided in ((per_sample * mask).sum(), per_sample.sum()):
        kind = loss_graph.read(divided / mask.sum())
        assert [t.factor != 0 for t in kind.terms] == [True]
