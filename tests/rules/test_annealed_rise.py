"""An early rise of a custom objective (GS414, information): Bayes by Backprop whose KL weight
is annealed from 0 over the first epochs rose 11× while it learned, and was told only to
lower the learning rate. The advice names the annealed term first; a recognised objective's
rise keeps its error and its learning-rate advice. No torch."""

from __future__ import annotations

from gradscope.findings import Severity
from tests.rules.test_rules_objectives import CE, CUSTOM, blown_up, found, run_of


def test_a_custom_objective_s_rise_names_an_annealed_term():
    (f,) = found(run_of(blown_up(), CUSTOM))["GS414"]
    assert f.severity == Severity.INFO
    assert "annealed up from 0" in f.advice and "learning rate" in f.advice


def test_a_recognised_objective_s_rise_keeps_its_advice():
    (f,) = found(run_of(blown_up(), CE))["GS414"]
    assert f.severity == Severity.ERROR and "annealed" not in f.advice
