"""GS442's advice where the gradients under eps are tiny: a known loss multiplied far down
(its factor in the graph) is told its natural scale; a loss whose own value is tiny with no
such factor (POT's plain-domain `ot.sinkhorn2` at a small reg: the plan underflows, the
loss is ~1e-9 at step 1) is told the underflow and the log domain."""

from __future__ import annotations

from gradscope.config import Thresholds
from gradscope.rules.step_eps import adam_eps_dominates
from gradscope.steps.meaning import LossKind, LossTerm
from gradscope.steps.records import ParamInfo, WatchRun
from gradscope.steps.state_facts import EpsSample, StateFacts
from tests.watcher.watch_scripts import step_record


def run_of(losses: list[float], kind: LossKind) -> WatchRun:
    eps = tuple(EpsSample(0, step, 1e-8, ((0, 0.9, 1000),)) for step in (1, 2, 3))
    steps = tuple(step_record(i, norm=1e-9, loss=x) for i, x in enumerate(losses, 1))
    params = (ParamInfo("0.weight", (64, 8), True, True, 0.1),)
    return WatchRun(
        "t",
        params,
        steps,
        "completed",
        1.0,
        optimizers=("Adam",),
        state_facts=StateFacts(eps=eps),
        loss_kinds=(kind,),
    )


CUSTOM = LossKind((), unknown_terms=1)
SCALED_CE = LossKind((LossTerm("cross_entropy", "mean", 1e-9, 10),))


def test_a_loss_computed_tiny_is_told_the_underflow_not_its_scale():
    (found,) = adam_eps_dominates(run_of([7.5e-9, 2e-10, 5e-14], CUSTOM), Thresholds())
    assert "the loss's own value is tiny (|loss| at most 7.50e-09 by step 2)" in found.advice
    assert "log domain" in found.advice and "natural scale" not in found.advice


def test_a_known_loss_multiplied_far_down_keeps_the_scale_advice():
    (found,) = adam_eps_dominates(run_of([2.3e-9, 2.2e-9, 2.1e-9], SCALED_CE), Thresholds())
    assert "natural scale" in found.advice and "underflow" not in found.advice


def test_a_loss_of_natural_size_with_tiny_gradients_keeps_the_scale_advice():
    (found,) = adam_eps_dominates(run_of([1.9, 1.9, 1.9], CUSTOM), Thresholds())
    assert "natural scale" in found.advice
