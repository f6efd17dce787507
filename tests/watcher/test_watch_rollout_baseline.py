"""REINFORCE with a greedy-rollout baseline (a frozen copy of the policy, decoded under
no_grad and replaced by load_state_dict when the policy beats it) handed to the optimizer
with the policy: no gradient reaches the copy and nothing moves it. GS413 warned and sent
the user looking for a graph cut ("check that it takes part in the loss"); the copy is not
meant to take part in the loss: the warning names the copy and what moves one (a copy into
it), and says to leave it out of the optimizer. The same loop with the baseline outside the
optimizer is silent."""

from __future__ import annotations

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched

LAYERS = ("embed", "enc.0", "enc.2")
BASELINE = {f"Pointer2.{n}.{w}" for n in LAYERS for w in ("weight", "bias")} | {
    "Pointer2.query.weight",
    "Pointer2.placeholder",
}


def test_a_rollout_baseline_in_the_optimizer_is_named_as_a_copy_nothing_moved():
    found = domain_watched("reinforce_rollout.py", "bl-in-opt").findings
    told = [f for f in found if f.rule == "GS413"]
    assert {f.subject for f in told} == BASELINE, found
    assert all(f.severity == Severity.WARNING for f in told), told
    for f in told:
        original = f.subject.replace("Pointer2.", "Pointer.")
        assert f"it is a copy of {original}" in f.message, f
        assert "takes part in the loss" not in f.advice, f
        assert "leave it out of the optimizer" in f.advice, f


def test_the_rollout_baseline_outside_the_optimizer_is_silent():
    assert domain_watched("reinforce_rollout.py", "rollout").findings == []
