"""GS456 on USAD's two autoencoders over one encoder: each Adam holds the encoder and its own
decoder, and each loss reaches the other's decoder through the adversarial term, leaving
that gradient to the other optimizer. Two players of one game over a shared trunk are the
method (a healthy run was a warning); the second Adam built over the whole model, which
leaves the first nothing of its own, is still named."""

from __future__ import annotations

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched


def test_usads_two_autoencoders_over_one_encoder_are_silent():
    report = domain_watched("usad_pair.py", "healthy")
    assert [f for f in report.findings if f.severity >= Severity.WARNING] == []


def test_the_second_optimizer_over_the_whole_model_is_named():
    report = domain_watched("usad_pair.py", "whole")
    (f,) = [f for f in report.findings if f.rule == "GS456"]
    assert f.severity == Severity.WARNING
    assert f.message.startswith("8 parameter(s) sit in both optimizer 0 (Adam) and optimizer 1")
