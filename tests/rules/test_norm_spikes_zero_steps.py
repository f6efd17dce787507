"""GS403 reads the gradient norm's level over the steps that had a gradient: GRPO's steps
whose every group drew one reward (all advantages 0) have a norm of exactly 0, and with
them in the window a batch with a signal read as a spike of sixty times the median. A real
jump above the steps with a gradient still is one."""

from __future__ import annotations

from gradscope.config import Thresholds
from gradscope.rules.step_norm_spike import norm_spike
from gradscope.steps.records import ParamInfo, WatchRun
from tests.watcher.watch_scripts import step_record

GRPO = [  # gradient norms of a GRPO run (two policy steps per batch, no KL term)
    0.142, 0.0133, 0.0, 0.0, 0.402, 0.118, 0.213, 0.035, 0.109, 0.00451, 0.0, 0.0, 0.0,
    0.0, 0.161, 0.0165, 0.0, 0.0, 0.183, 0.0794, 0.0654, 1.39e-05, 0.192, 0.0412, 0.284,
    0.0808, 0.115, 6.84e-05, 0.317, 0.0354, 0.07, 0.00426, 0.0376, 0.00869, 0.0, 0.0,
    0.154, 0.0155, 0.0, 0.0, 0.0, 0.0, 0.117, 0.049, 0.0998, 0.0782, 0.296, 0.0274,
]  # fmt: skip


def _run(norms: list[float]) -> WatchRun:
    records = tuple(
        step_record(i + 1, n, loss=-0.001 * (i % 2), max_norm=1.0) for i, n in enumerate(norms)
    )
    params = (ParamInfo("w", (8, 8), True, True, 1e-3),)
    return WatchRun("t", params, records, "completed", 1.0, optimizers=("AdamW",))


def test_steps_without_a_gradient_are_no_level_to_spike_from():
    assert norm_spike(_run(GRPO), Thresholds()) == []


def test_a_jump_above_the_steps_with_a_gradient_is_still_a_spike():
    """Steady norms between steps without a gradient, then one batch's norm 30× theirs."""
    norms = [0.0 if i % 3 == 2 else 0.1 + 0.01 * (i % 2) for i in range(48)]
    norms[40] = 3.0
    (found,) = norm_spike(_run(norms), Thresholds())
    assert found.rule == "GS403" and "step 41" in found.message
