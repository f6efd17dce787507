"""Mean Teacher with its EMA teacher handed to the optimizer too: the teacher never gets a
gradient, the optimizer skips it, and the EMA moves it. GS413 said "it never learns" as a
warning; it is information that names the copy (its first norm is read when it is first
tracked, after the first step, so that its values can be seen to change). A teacher whose
EMA update was forgotten never moves: that still warns."""

from __future__ import annotations

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched

TEACHER = {f"Sequential2.{n}" for n in ("0.weight", "0.bias", "2.weight", "2.bias")}


@pytest.fixture(scope="module")
def in_optimizer():
    return domain_watched("mean_teacher.py", "in_opt")


def test_a_teacher_in_the_optimizer_moved_by_its_ema_is_information(in_optimizer):
    found = in_optimizer.findings
    assert [f for f in found if f.severity >= Severity.WARNING] == [], found
    told = [f for f in found if f.rule == "GS413"]
    assert {f.subject for f in told} == TEACHER, found
    assert all("moves it itself by copying" in f.message for f in told), told


def test_the_teacher_first_seen_after_the_first_step_has_its_first_norm(in_optimizer):
    teacher = [p for p in in_optimizer.run.params if p.name in TEACHER]
    assert len(teacher) == 4 and all(p.weight_norm is not None for p in teacher), teacher
    assert all(p.last_norm is not None and p.last_norm != p.weight_norm for p in teacher)


def test_a_teacher_whose_ema_update_is_forgotten_still_never_learns():
    found = domain_watched("mean_teacher.py", "frozen_ema").findings
    loud = {f.subject for f in found if f.rule == "GS413" and f.severity == Severity.WARNING}
    assert loud == TEACHER, found
    assert all("it never learns" in f.message for f in found if f.subject in TEACHER)


def test_a_detached_teacher_is_silent():
    assert domain_watched("mean_teacher.py", "detached").findings == []
