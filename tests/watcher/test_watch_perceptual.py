"""A perceptual loss differentiates through a fixed feature extractor to the model before
it (tests/watcher/domain_scripts/perceptual_sr.py). Left requiring grad and in no
optimizer, the extractor is GS411's, and its advice must work for it: computing it under
torch.no_grad() or detaching its output, the advice for a target or teacher copy, would cut
the model's gradient; requires_grad_(False) is the fix. Frozen, the run is silent."""

from __future__ import annotations

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched


def test_a_frozen_feature_extractor_is_silent():
    report = domain_watched("perceptual_sr.py", "frozen")
    assert [f for f in report.findings if f.severity >= Severity.INFO] == [], report.findings


def test_an_unfrozen_extractor_is_told_to_freeze():
    report = domain_watched("perceptual_sr.py", "unfrozen")
    outside = [f for f in report.findings if f.rule == "GS411" and f.severity == Severity.ERROR]
    assert outside and outside[0].subject.startswith("Features.convs."), report.findings
    assert "requires_grad_(False)" in outside[0].advice, outside[0].advice
    assert "perceptual" in outside[0].advice, outside[0].advice
