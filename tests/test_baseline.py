"""Baseline comparison: norm changes are findings like any other (severity, ignore apply)."""

from __future__ import annotations

import pytest

from gradscope import baseline
from gradscope.config import Settings, load
from gradscope.findings import Severity
from gradscope.outcome import CheckReport, Outcome


def _report(norms: dict[str, float]) -> CheckReport:
    params = [{"name": n, "grad_norm": v} for n, v in norms.items()]
    result = Outcome("inspect", "net.py:build", document={"parameters": params})
    return CheckReport([result], Severity.ERROR)


def _compare(settings: Settings) -> list:
    saved = baseline.build(_report({"body.weight": 1.0, "body.bias": 2.0, "head.weight": 1.0}))
    now = _report({"body.weight": 100.0, "body.bias": 0.01, "head.weight": 1.5})
    (result,) = baseline.compare(now, saved, settings).results
    return result.findings


def test_norm_changes_beyond_the_factor():
    found = _compare(Settings())
    assert {(f.rule, f.subject) for f in found} == {
        ("GS110", "body.weight"),
        ("GS110", "body.bias"),
    }
    assert all(f.severity is Severity.ERROR for f in found)
    grew = next(f for f in found if f.subject == "body.weight")
    assert grew.value == pytest.approx(100.0) and grew.row.key == "exploding"


def _settings(tmp_path, text: str) -> Settings:
    path = tmp_path / "gs.toml"
    path.write_text(text)
    return load(str(path))


def test_norm_change_can_be_ignored_by_rule_and_glob(tmp_path):
    found = _compare(_settings(tmp_path, 'ignore = ["norm-change:body.bias"]'))
    assert [f.subject for f in found] == ["body.weight"]
    assert _compare(_settings(tmp_path, 'ignore = ["GS110:*"]')) == []


def test_norm_change_severity_can_be_overridden(tmp_path):
    found = _compare(_settings(tmp_path, '[severity]\nGS110 = "warning"'))
    assert found and all(f.severity is Severity.WARNING for f in found)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"[1, 2]", "not a gradscope baseline"),
        (b'{"kind": "baseline", "version": 1}', "`targets` is not an object"),
        (b'{"kind": "baseline", "version": 1, "targets": []}', "`targets` is not an object"),
        (
            b'{"kind": "baseline", "version": 1, "targets": {"t": {"norms": {}}}}',
            "`findings` is not a list",
        ),
        (
            b'{"kind": "baseline", "version": 1, "targets": {"t": {"findings": [["GS101"]], '
            b'"norms": {}}}}',
            "`findings` is not a list of [rule, subject] pairs",
        ),
        (
            b'{"kind": "baseline", "version": 1, "targets": {"t": {"findings": [], '
            b'"norms": {"w": "big"}}}}',
            "`norms` is not an object of numbers",
        ),
        (b"\xff\xfe{}", "not UTF-8"),
        (b"[" * 100_000, "not a JSON baseline"),
    ],
)
def test_a_malformed_baseline_is_one_clear_error(tmp_path, content, problem):
    from gradscope.errors import ConfigError

    path = tmp_path / "b.json"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as info:
        baseline.load(str(path))
    assert problem in str(info.value)
