"""A cause found at the symptom's first step explains it before a verdict on the whole run:
an ArcFace's acos without its clamp makes NaN gradients from a finite loss at step 46
(GS434), and the run's lr is also judged too high (GS419); the non-finite step (GS401) is
GS434's, as a high lr does not make a NaN in the backward of a finite loss. With no cause
at that step the whole-run verdict still explains it."""

from __future__ import annotations

from dataclasses import replace

from gradscope.findings import RULES
from gradscope.rules import causes
from tests.rules.test_causes import _run


def _at(rule: str, subject: str, steps: tuple[int, ...]):
    finding = RULES[rule].finding(subject, f"{rule} message", f"{rule} advice")
    return replace(finding, steps=steps)


def test_the_nan_made_at_the_symptoms_step_explains_it_before_the_lr():
    lr = _at("GS419", "learning-rate", (1,))
    nan = _at("GS434", "Arc.W", (46,))
    step = _at("GS401", "Arc.W", (46, 47, 48))
    out = causes.link(_run(), [lr, nan, step])
    (symptom,) = [f for f in out if f.rule == "GS401"]
    assert symptom.explained_by == "GS434:Arc.W"
    assert "weights-nan (GS434): fix that first" in symptom.advice


def test_without_a_cause_at_that_step_the_lr_still_explains_it():
    lr = _at("GS419", "learning-rate", (1,))
    step = _at("GS401", "Arc.W", (46, 47, 48))
    (_, symptom) = causes.link(_run(), [lr, step])
    assert symptom.explained_by == "GS419:learning-rate"
