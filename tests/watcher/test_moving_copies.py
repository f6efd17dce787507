"""A copy of the trained model that the script moves between steps and runs without
gradients (DINO's, BYOL's or Mean Teacher's EMA teacher) makes targets that move as the
model learns: DINO's cross-entropy rises by design as the teacher's centred targets spread
out, and GS414 called that rise an error ("lower the learning rate") on a healthy DINO.
Such a run is not judged by its loss's level; a frozen copy (a fixed teacher, its targets
still) is not counted, and a blow-up beside it is still an error."""

from __future__ import annotations

import dataclasses

from test_watch_rules_series import found, run_of, tiny_transformer_lr_03

from gradscope.findings import Severity
from gradscope.steps.state_facts import StateFacts
from tests.watcher.watch_scripts import domain_watched

SCRIPT = "self_distill.py"


def test_an_ema_teacher_run_without_gradients_is_counted_and_a_fixed_one_not():
    facts = domain_watched(SCRIPT, "dino-data").run.state_facts  # moved through .data
    assert facts.copy_steps >= 29  # its forward at every step after the first
    assert domain_watched(SCRIPT, "dino-fixed").run.state_facts.copy_steps == 0


def _with_copy_steps(run, seen):
    return dataclasses.replace(run, state_facts=StateFacts(copy_steps=seen))


def test_a_rise_beside_a_moving_teacher_is_information_and_a_blowup_beside_none_an_error():
    run = run_of(tiny_transformer_lr_03())
    (teacher,) = found(_with_copy_steps(run, len(run.steps)))["GS414"]
    assert teacher.severity == Severity.INFO
    assert teacher.advice.startswith("not judged: a copy of the trained model that the script")
    (alone,) = found(_with_copy_steps(run, 0))["GS414"]
    assert alone.severity == Severity.ERROR
    (seldom,) = found(_with_copy_steps(run, len(run.steps) // 10))["GS414"]
    assert seldom.severity == Severity.ERROR
