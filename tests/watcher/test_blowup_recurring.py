"""An online learner (one backward and one step per time step of a sequence, the recurrent
state detached between them, as e-prop and real-time recurrent learning do) fitting a sine:
every pass over the sequence begins where the target climbs from 0, so the loss rises in the
first steps of each pass and falls back. GS414 read the first pass's rise as a fresh model's
blow-up that never recovered (an error, with GS419 blaming the lr). A rise the loss repeats
after coming back is the data's pattern; a rise once, or again only after a warm restart
re-raised the lr, is still a blow-up."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from watch_scripts import step_record

import gradscope
from gradscope.config import Thresholds
from gradscope.rules import watch as rules
from gradscope.steps.meaning import LossKind, LossTerm
from gradscope.steps.records import ParamInfo, WatchRun


class _Spike(torch.autograd.Function):
    """Heaviside forward, fast-sigmoid surrogate backward (a spiking neuron's)."""

    @staticmethod
    def forward(ctx, v):
        ctx.save_for_backward(v)
        return (v > 0).float()

    @staticmethod
    def backward(ctx, grad):
        (v,) = ctx.saved_tensors
        return grad / (25 * v.abs() + 1) ** 2


def _online_sine(passes: int = 3, steps: int = 60) -> list[str]:
    torch.manual_seed(0)
    encode, readout = nn.Linear(12, 40), nn.Linear(40, 1)
    opt = torch.optim.SGD([*encode.parameters(), *readout.parameters()], lr=0.05)
    target = torch.sin(torch.linspace(0, 4 * math.pi, steps))
    with gradscope.watch() as w:
        for _ in range(passes):
            mem, trace = torch.zeros(8, 40), torch.zeros(8, 40)
            x = torch.bernoulli(torch.full((steps, 8, 12), 0.2))
            for t in range(steps):
                mem = 0.9 * mem.detach() + encode(x[t])
                spikes = _Spike.apply(mem - 1.0)
                mem = mem - spikes.detach()
                trace = 0.8 * trace.detach() + spikes
                loss = F.mse_loss(readout(trace), target[t].expand(8, 1))
                opt.zero_grad()
                loss.backward()
                opt.step()
    return [f.rule for f in w.report.findings if f.severity >= gradscope.Severity.WARNING]


def test_an_online_learners_rise_at_each_pass_is_no_blowup():
    assert _online_sine() == []


def _verdicts(losses: list[float], lrs: list[float]) -> list[str]:
    """GS414's verdicts on a fabricated MSE run whose norm follows the loss."""
    records = tuple(
        step_record(i + 1, 4 * math.sqrt(v), v, lrs=(lr,))
        for i, (v, lr) in enumerate(zip(losses, lrs, strict=True))
    )
    run = WatchRun(
        "script train.py",
        (ParamInfo("w", (4, 4), True, True, 0.1),),
        records,
        "completed",
        1.0,
        optimizers=("SGD",),
        loss_kinds=(LossKind((LossTerm("mse", "mean", 1.0),)),),
    )
    return [f.rule for f in rules.diagnose(run, Thresholds()) if f.rule == "GS414"]


RISE = [0.02, 0.2, 0.4, 0.5, 0.4, 0.2, 0.05]
PASS = [0.02, 0.03, 0.025, 0.03, 0.02, 0.025] * 6


def test_a_rise_that_recurs_is_the_datas_pattern():
    assert _verdicts((RISE + PASS) * 3, [0.05] * 3 * len(RISE + PASS)) == []


def test_a_rise_once_is_still_a_blowup():
    losses = RISE + PASS * 3
    assert _verdicts(losses, [0.05] * len(losses)) == ["GS414"]


def test_a_rise_again_after_a_warm_restart_is_still_a_blowup():
    decay = [0.05 * (1 - i / len(RISE + PASS)) for i in range(len(RISE + PASS))]
    assert _verdicts((RISE + PASS) * 3, decay * 3) == ["GS414"]
