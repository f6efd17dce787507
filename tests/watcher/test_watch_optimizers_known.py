"""Optimizers gradscope does not know are not read with Adam's or AdamW's meaning: Prodigy
(vendored, tests/watcher/optimizer_scripts/optim_vendor) holds betas, eps, exp_avg_sq and
a weight_decay, yet its moments are d²-scaled, its denominator √v + d·eps and its decay
decoupled and scaled by d. Its healthy run stays silent (it gave GS420 "L2 decay erases the
weights" and GS442 "eps dominates"); its real bugs still fire from what was measured (a
true lr 100× too high blows the loss up), and so do the readings of the classes gradscope
knows (Lion's decoupled decay too strong; torch's own in test_watch_meaning.py and
test_watch_state.py) and of an Adam it does not know, whose measured update is Adam's."""

from __future__ import annotations

import functools
import os
import sys

import pytest
import torch

from gradscope.findings import Severity
from gradscope.rules.adam_measured import adam_measured
from gradscope.watcher import optim_known
from gradscope.watcher.adam_eps import adam_state
from gradscope.watcher.discover import Tracked
from gradscope.watcher.optim_settings import group_settings

SCRIPTS = os.path.join(os.path.dirname(__file__), "optimizer_scripts")
VENDOR = os.path.join(SCRIPTS, "optim_vendor")


@functools.cache
def _watched(name: str, steps: int = 60):
    from gradscope.watcher import watch_script

    return watch_script(os.path.join(SCRIPTS, "train.py"), ["lm", name, str(steps)])


def _said(report) -> dict[str, Severity]:
    return {f.rule: f.severity for f in report.findings}


@pytest.fixture(scope="module")
def vendored():
    sys.path.append(VENDOR)
    try:
        from lion_pytorch import Lion
        from prodigyopt import Prodigy

        yield Prodigy, Lion
    finally:
        sys.path.remove(VENDOR)


@pytest.mark.slow
def test_a_healthy_prodigy_run_is_silent():
    report = _watched("prodigy")
    losses = [r.loss for r in report.run.steps]
    assert sum(losses[-10:]) < 0.85 * sum(losses[:10])  # it trains
    assert [f for f in report.findings if f.severity >= Severity.WARNING] == [], report.findings


@pytest.mark.slow
def test_prodigy_at_a_true_lr_far_too_high_still_fires():
    said = _said(_watched("prodigy-lr100", 40))
    assert said.get("GS414") == Severity.ERROR, said  # the loss blew up: measured
    assert "GS420" not in said and "GS442" not in said


@pytest.mark.slow
def test_an_adam_gradscope_does_not_know_is_read_by_its_measured_update():
    """Adam written out on Optimizer (adam_clone.py) with eps=0.1 on gradients of 1e-3:
    its measured first updates are Adam's, so its eps is read as Adam's and GS442 fires;
    Prodigy's are thousands of times below what its state gives under Adam's rule."""
    clone = _watched("clone-eps", 40)
    assert _said(clone).get("GS442") == Severity.WARNING, _said(clone)
    assert adam_measured(clone.run, 0, clone.run.state_facts.eps)
    prodigy = _watched("prodigy")
    samples = prodigy.run.state_facts.eps
    assert any(s.predicted for s in samples) and not any(s.known for s in samples)
    assert not adam_measured(prodigy.run, 0, samples)


@pytest.mark.slow
def test_lions_decoupled_decay_too_strong_still_fires():
    said = _said(_watched("lion-wd100"))
    assert said.get("GS420") == Severity.ERROR, said


def _state(optimizer, params):
    """adam_state of the optimizer's group after one step."""
    for p in params:
        p.grad = torch.full_like(p, 1e-3)
    optimizer.step()
    tracked = Tracked(list(params), ["w"] * len(params), {id(p): i for i, p in enumerate(params)})
    return adam_state(tracked, optimizer, optimizer.param_groups[0])


class _AdamLookalike(torch.optim.Optimizer):
    """Adam's keys and state names on a rule of its own (a sign step)."""

    def __init__(self, params):
        super().__init__(params, {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                state.setdefault("step", 0)
                state["step"] += 1
                v = state.setdefault("exp_avg_sq", torch.zeros_like(p))
                v.mul_(0.999).add_(p.grad.square(), alpha=1e-3)
                p.add_(p.grad.sign(), alpha=-group["lr"])


class _LoggedAdamW(torch.optim.AdamW):
    def step(self, closure=None):
        return super().step(closure)


@pytest.mark.parametrize(
    "make, adam",
    [
        (lambda ps, v: v[0](ps, lr=1.0, weight_decay=0.01), False),
        (lambda ps, v: _AdamLookalike(ps), False),
        (lambda ps, v: torch.optim.Adam(ps, lr=1e-3), True),
        (lambda ps, v: torch.optim.AdamW(ps, lr=1e-3), True),
        (lambda ps, v: _LoggedAdamW(ps, lr=1e-3), True),
        (lambda ps, v: torch.optim.NAdam(ps, lr=1e-3), True),
        (lambda ps, v: torch.optim.RAdam(ps, lr=1e-3), False),  # its first steps are SGD's
    ],
)
def test_adams_state_is_read_only_under_adams_rule(vendored, make, adam):
    params = [torch.nn.Parameter(torch.randn(4, 4))]
    got = _state(make(params, vendored), params)
    assert (got is not None) == adam


@pytest.mark.parametrize(
    "make, decoupled, update",
    [
        (lambda ps, v: v[0](ps, lr=1.0, weight_decay=0.01), None, "adapted"),
        (lambda ps, v: _AdamLookalike(ps), None, ""),
        (lambda ps, v: v[1](ps, lr=3e-4, weight_decay=0.1), True, "sign"),
        (lambda ps, v: torch.optim.AdamW(ps, lr=1e-3), True, "adam"),
        (lambda ps, v: _LoggedAdamW(ps, lr=1e-3), True, "adam"),
        (lambda ps, v: torch.optim.Adam(ps, lr=1e-3, weight_decay=0.1), False, "adam"),
        (lambda ps, v: torch.optim.Adam(ps, decoupled_weight_decay=True), True, "adam"),
        (lambda ps, v: torch.optim.SGD(ps, lr=0.1, weight_decay=1e-4), False, "torch"),
        (lambda ps, v: torch.optim.Muon(ps, lr=0.02), True, "torch"),
    ],
)
def test_the_decays_kind_and_the_steps_size_are_known_or_said_unknown(
    vendored, make, decoupled, update
):
    params = [torch.nn.Parameter(torch.randn(4, 4))]
    optimizer = make(params, vendored)
    assert group_settings(optimizer, optimizer.param_groups[0]).decoupled is decoupled
    assert optim_known.update(optimizer) == update
