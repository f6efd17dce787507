"""GS447: DPO's reference model (a deep copy of the policy) left in the optimizer with its
forward attached: at the first step the copy's gradients are the exact negation of the
policy's. Look-alikes stay silent: the reference under no_grad, twin critics deep-copied
and trained on one target (the same gradient), two retrieval towers copied from one
encoder (unrelated gradients). A model handed to an optimizer while only another's
gradients are clipped is read back without an internal error."""

from __future__ import annotations

import os

import pytest

from gradscope.findings import Severity
from gradscope.watcher import watch_script
from tests.watcher.watch_scripts import DOMAINS, domain_watched

SCRIPT = "reference_copy.py"


@pytest.mark.parametrize("mode", ["dpo", "twins", "towers"])
def test_copies_trained_alike_or_kept_out_are_silent(mode):
    found = domain_watched(SCRIPT, mode).findings
    assert not [f for f in found if f.severity >= Severity.WARNING]


def test_a_reference_trained_with_the_policy_is_named():
    (found,) = [f for f in domain_watched(SCRIPT, "dpo-trained").findings if f.rule == "GS447"]
    assert found.severity == Severity.WARNING and found.subject == "Sequential2"
    assert "copy of Sequential" in found.message and "negation" in found.message
    assert "torch.no_grad()" in found.advice and "out of the optimizer" in found.advice


def test_a_late_model_with_only_the_policy_clipped_reads_back_every_step():
    """The reference's tensors join the watch at its optimizer's first step while the clip
    measured only the policy's: its update norms are wider than that step's gradient norms."""
    report = watch_script(os.path.join(DOMAINS, SCRIPT), ["dpo-trained"], flush_every=1)
    assert report.run.status == "completed"
    assert not [n for n in report.run.notes if "internal error" in n]
    assert len(report.run.steps) == 15
