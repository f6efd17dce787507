"""Supervised loops whose targets, logits or modes look like a bug's: few-shot episodes,
negative sampling, hard-example mining, test-time adaptation. A prototypical network's
query labels are the classes' places in the episode, arange(N) repeated: the same tensor
at every step while every episode draws new classes and samples (GS443 said each step
trained on one batch), as are the labels of positives followed by sampled negatives
(neural collaborative filtering's cat([ones(n), zeros(4n)])). An episode drawn once,
before the loop, has the same labels and is no longer told by them (as a contrastive
loss's positions are not): its inputs would tell it, which GS443 does not read. Hard-
example mining on separable data grows its margin: the output logits' log-partition
climbs while their mean stays put, which no z-loss is for (GS454 said the level drifted
and the loss would diverge next). TENT's BatchNorms without running statistics normalise
by the batch in eval mode too."""

from __future__ import annotations

import math

import pytest
import torch

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched


def _rules(report) -> set[str]:
    return {f.rule for f in report.findings}


@pytest.mark.parametrize("mode", ["blocks", "turns"])
def test_episode_labels_are_no_same_batch(mode):
    report = domain_watched("episodes.py", mode, "12")
    assert report.findings == [], report.findings


def test_negative_samplings_laid_out_labels_are_no_same_batch():
    report = domain_watched("negative_sampling.py")
    assert report.findings == [], report.findings


def test_labels_built_from_arange_are_told_from_labels_read_from_data():
    from gradscope.watcher.same_batch import _laid_out

    built = [
        torch.arange(5).repeat_interleave(6),
        torch.arange(4).repeat(8),
        torch.arange(9),
        torch.arange(3).repeat_interleave(2).to(torch.int32),
        torch.cat([torch.ones(16), torch.zeros(64)]),  # positives, then sampled negatives
        torch.tensor([0, 0, 1, 1, 2]),
        torch.tensor([1, 1, 2, 2]),
    ]
    read = [
        torch.tensor([0, 1, 1, 0]),  # balanced, in no laid-out order
        torch.tensor([0.0, 1.0, 1.0, 0.0]),
        torch.linspace(0, 1, 8),  # sorted, but values of a regression
        torch.tensor([2, 0, 1, 1]),
        torch.randint(0, 5, (64,), generator=torch.Generator().manual_seed(0)),
    ]
    assert [bool(_laid_out(t)) for t in built] == [True] * len(built)
    assert [bool(_laid_out(t)) for t in read] == [False] * len(read)


def test_hard_example_mining_grows_a_margin_not_a_drift():
    report = domain_watched("hard_examples.py", "ohem")
    assert [f for f in report.findings if f.severity >= Severity.WARNING] == [], report.findings
    logits = report.run.state_facts.output_logits
    ln_c = math.log(logits.classes)
    assert logits.mean[-1] - ln_c > 10  # log Z climbed...
    assert abs(logits.level[-1] - logits.level[0]) < 1  # ...by its spread, not its level


@pytest.mark.parametrize("mode", ["train", "eval-no-stats"])
def test_tent_adapting_batchnorms_by_the_batchs_statistics_is_silent(mode):
    """A BatchNorm whose running statistics are removed normalises by the batch in eval
    mode too: TENT's model in eval() adapts as in train() (GS440 said it normalised with
    running statistics it did not update)."""
    report = domain_watched("tent_adapt.py", mode)
    assert report.findings == [], report.findings


def test_tent_in_eval_with_its_running_statistics_is_named():
    report = domain_watched("tent_adapt.py", "eval")
    (f,) = report.findings
    assert f.rule == "GS440" and f.severity == Severity.WARNING
    assert "BatchNorm" in f.message and "eval()" in f.message


def test_center_loss_with_its_own_optimizer_is_silent():
    report = domain_watched("center_loss.py", "healthy")
    assert report.findings == [], report.findings


def test_an_optimizer_reset_but_never_stepped_is_named_as_such():
    """The centers are in a param group: GS411 said they were in none and that no
    zero_grad() cleared them, and advised to detach a teacher's forward."""
    report = domain_watched("center_loss.py", "no-step")
    (f,) = report.findings
    assert f.rule == "GS411" and f.subject == "CenterLoss.centers"
    assert "(SGD) whose zero_grad() ran but whose step() never did" in f.message
    assert "step() after the backward" in f.advice and "no_grad" not in f.advice
