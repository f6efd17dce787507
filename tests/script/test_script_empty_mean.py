"""A detector's box loss on a batch with no object is a mean over no elements: NaN from
finite inputs, all of them empty (tests/watcher/domain_scripts/grid_detection.py,
`unguarded`). inspect named the op and advised a clamp or an epsilon, which cannot fix a
0/0 of nothing; it says the selection was empty and that the term wants a guard. A NaN
from a log of 0 over real elements is told as before (test_script_step.py)."""

from __future__ import annotations

import os

from gradscope.inspector import script
from tests.watcher.watch_scripts import DOMAINS


def test_a_mean_over_an_empty_selection_is_named():
    path = os.path.join(DOMAINS, "grid_detection.py")
    found = script.run_step(path, ["unguarded"], step=1, explain=True)
    assert not found.stats.loss_finite
    (said,) = found.evidence["non-finite"]
    assert said.startswith("first non-finite value made by `mean` at "), said
    assert "all of them empty: a mean over no elements (0/0)" in said, said
    assert "if mask.any()" in said, said


def test_the_guarded_loop_has_no_nan_to_explain():
    path = os.path.join(DOMAINS, "grid_detection.py")
    found = script.run_step(path, ["guarded"], step=1, explain=True)
    assert found.stats.loss_finite
    assert "non-finite" not in found.evidence
