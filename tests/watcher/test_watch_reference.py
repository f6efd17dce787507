"""A model handed to an optimizer while only another's gradients are clipped (DPO's
reference copy left in the optimizer, the policy clipped as trainers do) is read back
without an internal error."""

from __future__ import annotations

import os

from gradscope.watcher import watch_script
from tests.watcher.watch_scripts import DOMAINS

SCRIPT = "reference_copy.py"


def test_a_late_model_with_only_the_policy_clipped_reads_back_every_step():
    """The reference's tensors join the watch at its optimizer's first step while the clip
    measured only the policy's: its update norms are wider than that step's gradient norms."""
    report = watch_script(os.path.join(DOMAINS, SCRIPT), ["dpo-trained"], flush_every=1)
    assert report.run.status == "completed"
    assert not [n for n in report.run.notes if "internal error" in n]
    assert len(report.run.steps) == 15
