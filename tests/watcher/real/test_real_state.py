"""Silent bugs of state on real training code (issue 40, GS440-GS443): nanoGPT and
word_language_model left in eval mode after their evaluation, nanoGPT and a user's MLP with
Adam's eps at 0.1, mnist on a loader that yields one batch; each named first, at the step
its effect starts. vae with eps=1e-3 (√v̂ larger still) stays silent, and so does every
healthy stock run (test_real_verdicts.py). The bugs are drivers/inject.py's."""

from __future__ import annotations

import pytest

from gradscope.findings import Severity

from . import runs

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    ("name", "rule", "first", "severity"),
    [
        ("nanogpt-eval-left", "GS440", 1, Severity.WARNING),  # evaluates at iteration 0
        ("word-lm-eval-left", "GS440", 8, Severity.WARNING),  # evaluates after epoch 1
        ("nanogpt-adam-eps", "GS442", 1, Severity.WARNING),
        ("mlp-adam-eps", "GS442", 1, Severity.WARNING),
        ("mnist-one-batch", "GS443", 1, Severity.INFO),
    ],
)
def test_a_seeded_state_bug_in_real_code_is_named_first(name, rule, first, severity):
    report = runs.watched(name)
    assert report.run.status == "completed", report.run.error
    lead = report.findings[0]
    assert lead.rule == rule and lead.severity == severity and lead.steps[0] == first
    assert [f.rule for f in report.findings if f.severity >= Severity.WARNING] in ([], [rule])


def test_the_first_step_in_eval_mode_is_the_one_after_the_evaluation():
    """word_language_model evaluates after each epoch (7 steps of its tiny corpus): the 8th
    step is the first whose forward ran in a model whose train() was never called again.
    The 7th step's update by hand is found at the 8th backward, after the evaluation: the
    mode is the one its forward ran in, not the one at the moment the update is found."""
    (f,) = [f for f in runs.watched("word-lm-eval-left").findings if f.rule == "GS440"]
    assert f.message.startswith("model (RNNModel) was in eval mode at 21 of its 28 optimizer steps")
    assert "switched by eval() at" in f.message and "1 dropout module" in f.message


def test_a_large_eps_where_root_v_is_larger_still_is_silent():
    """vae's summed binary cross-entropy gives gradients far above eps=1e-3."""
    report = runs.watched("vae-adam-eps")
    assert report.run.status == "completed"
    assert not [f for f in report.findings if f.rule == "GS442"]
