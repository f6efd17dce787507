"""A loss that fell a little and flattened (GS415, information) told every run to try a
lower learning rate. A click-through model on noisy labels does just that while it learns:
its log loss ends near the labels' own entropy, a few percent below its start (DCN-v2,
DeepFM, AutoInt). The learning rate's advice is now kept for the runs that say the step
was too large (the clip bound at most steps) or that the model did not learn (the loss at
the uniform guess)."""

from __future__ import annotations

import math
import random

import torch
import torch.nn.functional as F
from torch import nn
from watch_scripts import step_record

import gradscope as gs
from gradscope.rules import watch as rules
from gradscope.steps.meaning import LossKind, LossTerm
from gradscope.steps.records import ParamInfo, WatchRun

LOWER_LR = "try a lower learning rate"


def _stall(start: float, floor: float, **fields) -> list:
    """150 steps of a 65-class cross-entropy: start → floor in 40 steps, then flat."""
    rng = random.Random(5)
    records = tuple(
        step_record(
            s,
            1.0,
            (floor + (start - floor) * max(0.0, 1 - s / 40)) * math.exp(rng.gauss(0, 0.02)),
            lrs=(1e-3,),
            **fields,
        )
        for s in range(1, 151)
    )
    kind = LossKind((LossTerm("cross_entropy", "mean", 1.0, classes=65),))
    params = (ParamInfo("w", (4, 4), True, True, 0.1),)
    run = WatchRun("script train.py", params, records, "completed", 1.0, loss_kinds=(kind,))
    return [f for f in rules.diagnose(run, gs.config.Thresholds()) if f.rule == "GS415"]


def test_a_stall_that_learned_is_not_told_to_lower_the_learning_rate():
    (f,) = _stall(4.2, 3.7)
    assert LOWER_LR not in f.advice and "held-out metric" in f.advice


def test_a_binding_clip_or_a_loss_at_the_uniform_guess_keeps_the_learning_rate_advice():
    (clipped,) = _stall(4.2, 3.7, max_norm=0.5)
    assert LOWER_LR in clipped.advice
    (chance,) = _stall(4.6, math.log(65))
    assert "uniform guess" in chance.message and LOWER_LR in chance.advice


def test_a_click_model_on_noisy_labels_is_not_told_to_lower_the_learning_rate():
    torch.manual_seed(0)
    w, model = torch.randn(8), nn.Linear(8, 1)
    opt = torch.optim.Adam(model.parameters(), lr=3e-2)
    with gs.watch() as watched:
        for _ in range(150):
            x = torch.randn(256, 8)
            y = torch.bernoulli(torch.sigmoid(0.3 * x @ w))
            loss = F.binary_cross_entropy_with_logits(model(x).squeeze(-1), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    found = [f for f in watched.report.findings if f.rule == "GS415"]
    assert all(f.severity == gs.Severity.INFO and LOWER_LR not in f.advice for f in found)
