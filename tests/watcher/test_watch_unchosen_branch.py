"""GS413 on a tensor read only through a torch.where branch that its condition never chose:
POMO's multi-start decoding gives every rollout its first node, so the first step's
learned placeholder, read as torch.where(step == 0, placeholder, last), never is. Its
gradients are exact zeros, and the finding said to look for cancelling terms; it names the
branch now, and a straight-through estimator is not its advice. The same decoder started
from the placeholder (single-start REINFORCE) is silent: the walk that skips the unchosen
branches still reaches what the chosen ones read."""

from __future__ import annotations

import torch

from gradscope.autograd_walk import WHERE_UNCHOSEN
from gradscope.findings import Severity
from gradscope.watcher.unchosen_branches import unchosen_leaves
from tests.watcher.watch_scripts import domain_watched


def test_a_placeholder_a_multi_start_decoder_never_reaches_names_the_branch():
    report = domain_watched("reinforce_rollout.py", "multistart")
    assert not report.faults, report.internal_error()
    loud = [f for f in report.findings if f.severity >= Severity.WARNING]
    assert [f.subject for f in loud] == ["placeholder"], report.findings
    (f,) = loud
    assert f.rule == "GS413"
    assert "torch.where branch whose condition never chose it" in f.message
    assert "straight-through" not in f.advice and "terms that cancel" not in f.advice


def test_a_leaf_also_read_through_a_chosen_branch_is_not_behind_one():
    a, b = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
    none = torch.zeros(3, dtype=torch.bool)
    out = torch.where(none, a * 2, b) + torch.where(~none, b, a.exp()) + torch.where(none, b, b)
    assert [t is a for t in unchosen_leaves([out.grad_fn])] == [True]
    mixed = torch.tensor([True, False, True])
    assert unchosen_leaves([torch.where(mixed, a, b).grad_fn]) == []
    assert WHERE_UNCHOSEN.startswith("torch.where")
