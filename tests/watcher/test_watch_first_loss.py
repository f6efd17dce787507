"""The first step's loss is that of its own backward calls: backward-only iterations
before an optimizer exists (or before its first step) are not summed into it. Each
script records the loss and backward calls of every step as it sees them (the oracle)."""

from __future__ import annotations

import json

import pytest
from watch_scripts import script

from gradscope.watcher import watch_script


def watched(tmp_path, case: str, warmup: int):
    out = tmp_path / "oracle.json"
    report = watch_script(script("first_loss.py"), [str(out), case, str(warmup)])
    assert report.run.status == "completed", report.run.error
    return report, json.loads(out.read_text())["steps"]


def agree(report, oracle) -> None:
    steps = report.run.steps
    assert [(s.backward_calls, s.step) for s in steps] == [
        (o["calls"], i) for i, o in enumerate(oracle, start=1)
    ]
    for s, o in zip(steps, oracle, strict=True):
        assert s.loss == pytest.approx(o["loss"], rel=1e-6), s.step
    # the script trains one fixed batch: GS443 says so, as information, and nothing else
    assert [f.rule for f in report.findings] in ([], ["GS443"]), report.findings


@pytest.mark.parametrize(
    "case",
    [
        "warmup",  # zero_grad between the warm-up passes, the optimizer made after them
        "no_reset",  # nothing resets the warm-up gradients until the loop's zero_grad
        "by_hand",  # p.grad = None between the warm-up passes
        "early_optimizer",  # the optimizer exists (and zeroes them) during the warm-up
    ],
)
def test_backward_only_iterations_are_not_part_of_the_first_step(tmp_path, case):
    report, oracle = watched(tmp_path, case, 60)
    agree(report, oracle)
    assert report.run.backward_calls == 60 + 5


def test_gradients_accumulated_across_the_optimizers_creation_count_in_its_first_step(
    tmp_path,
):
    """Two micro-batches before the optimizer is made and two after, none reset: the first
    step applies all four, as every later step of four does."""
    report, oracle = watched(tmp_path, "across", 30)
    assert oracle[0]["calls"] == 4
    agree(report, oracle)


def test_a_thousand_backward_only_iterations_leave_the_first_loss_as_it_was(tmp_path):
    """The reported case: 1,000 warm-up passes, then the optimizer; the first loss was
    their sum (1,001 backward calls)."""
    report, oracle = watched(tmp_path, "warmup", 1000)
    agree(report, oracle)
    first = report.run.steps[0]
    assert first.backward_calls == 1
    assert first.loss == pytest.approx(oracle[0]["loss"], rel=1e-6)
