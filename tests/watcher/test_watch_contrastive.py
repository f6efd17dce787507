"""A contrastive loss (InfoNCE: MoCo, CLIP, SimCLR) is a cross-entropy whose targets are
places in the batch, 0..n-1 or the positive's one index, and whose classes are other
samples' embeddings: a queue, a momentum encoder. MoCo's rises early by design (its queue
starts as random, easy negatives), so its level is information, not an early blow-up
(GS414). Class-index targets that are data keep the verdict (domain_scripts/contrastive.py)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from gradscope.findings import Severity
from gradscope.watcher.same_batch import SameBatch
from tests.watcher.watch_scripts import watched_domain


def _positional(targets) -> bool:
    batches = SameBatch()
    x = torch.randn(8, 8, requires_grad=True)
    for step, y in enumerate(targets, 1):
        batches.observe(F.cross_entropy(x, y), step)
    (facts,) = batches.facts()
    return facts.positional


@pytest.mark.parametrize(
    ("targets", "positional"),
    [
        ([torch.arange(8)] * 3, True),  # CLIP's labels
        ([torch.arange(8).roll(4)] * 3, True),  # SimCLR's: the other view's place
        ([torch.zeros(8, dtype=torch.long)] * 3, True),  # MoCo's: the positive first
        ([torch.randint(0, 8, (8,)) for _ in range(3)], False),  # data
        ([torch.arange(8), torch.arange(8), torch.randint(0, 8, (8,))], False),
    ],
)
def test_targets_that_are_places_in_the_batch_are_told(targets, positional):
    assert _positional(targets) is positional


@pytest.mark.slow
@pytest.mark.parametrize("case", ["moco", "clip"])
def test_a_contrastive_loss_is_no_warning(case):
    report = watched_domain("contrastive.py", case)
    assert [f for f in report.findings if f.severity >= Severity.WARNING] == [], report.findings
    assert report.run.state_facts.repeats[0].positional


@pytest.mark.slow
def test_mocos_early_rise_is_information_that_names_its_targets():
    (finding,) = watched_domain("contrastive.py", "moco").findings
    assert (finding.rule, finding.severity) == ("GS414", Severity.INFO)
    assert finding.advice.startswith("not judged: its targets are places in the batch")


@pytest.mark.slow
def test_a_classifier_whose_labels_are_data_still_blows_up():
    report = watched_domain("contrastive.py", "cls-lr")
    assert not report.run.state_facts.repeats[0].positional
    (blowup,) = [f for f in report.findings if f.rule == "GS414"]
    assert blowup.severity == Severity.ERROR
