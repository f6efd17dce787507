"""GS417 on the zero point of torch.ao's learnable fake quantizer (LSQ+): its derivative is
nonzero only for inputs outside the quantised range, and a symmetric weight quantizer resets
it to 0 at each forward, so once the observers are disabled and the scale learns, no weight
is clipped and it gets exact zeros by the quantizer's design. GS417 warned that it stopped
learning and pointed at a cut graph; it is now information that names the quantizer. The
QAT graph is read although a float model trained first (its graphs read before the QAT
optimizer stepped); the float optimizer kept for QAT is still GS411's error."""

from __future__ import annotations

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched


def test_a_symmetric_zero_point_that_stops_once_nothing_clips_is_information():
    report = domain_watched("qat_learnable.py", "healthy")
    assert not report.faults, report.internal_error()
    assert not [f for f in report.findings if f.severity >= Severity.WARNING], report.findings
    stopped = [f for f in report.findings if f.rule == "GS417"]
    assert stopped
    for f in stopped:
        assert f.severity == Severity.INFO
        assert f.subject.endswith("weight_fake_quant.zero_point")
        assert "zero point of a learnable fake quantizer" in f.message


def test_the_float_optimizer_kept_for_qat_is_still_an_error():
    report = domain_watched("qat_learnable.py", "opt-before")
    assert not report.faults, report.internal_error()
    missing = [f for f in report.findings if f.rule == "GS411"]
    assert missing and missing[0].severity == Severity.ERROR
    assert "scale" in " ".join(f.message for f in missing)
