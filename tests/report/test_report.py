"""Reporters: the terminal report through a pinned console, and the JSON document."""

from __future__ import annotations

import json

from fabricated import param, stats

from gradscope import rules
from gradscope.inspector.results import Report
from gradscope.report import json as json_report
from gradscope.report import terminal
from gradscope.report.console import View


def make_report(*params, **kw):
    run = stats(*params, **kw)
    return Report("t.py:build", run, rules.diagnose(run), {"explode-norm": 1e3}, "2.x")


def render(report, top=30, width=100):
    return terminal.render(report, View(width=width, color=False, top=top))


def test_terminal_report_sections_and_grouping():
    report = make_report(
        param("body.weight"), *[param(f"aux.l{i}", None) for i in range(10)], ran=("body",)
    )
    text = render(report)
    assert "gradscope inspect · t.py:build" in text
    assert "ERROR   GS101 none-grad\n" in text
    assert "10 subjects: aux.l0, aux.l1" in text
    assert "(+4 more)" in text
    assert "advice:" in text and "table:" not in text  # the row: `gradscope rules`, JSON
    assert "verdict: ERROR  (10 errors, 0 warnings, 0 info)" in text
    assert text.count("advice:") == 1  # ten findings, one paragraph


def test_terminal_table_truncates_but_keeps_flagged_rows():
    params = [param(f"layer{i}.weight", 0.1 + i * 1e-3) for i in range(200)]
    params[150] = param("layer150.weight", float("nan"), finite=False)
    text = render(make_report(*params), top=10)
    assert "showing 10 of 200 parameter tensors" in text
    assert "layer150.weight" in text and "non-finite" in text
    assert "layer199.weight" in text  # largest norm among the healthy ones
    assert "layer3.weight" not in text
    assert len(render(make_report(*params), top=None).splitlines()) > 200


def test_healthy_report():
    text = render(make_report(param("a.weight"), param("b.weight")))
    assert "No findings." in text and "verdict: OK" in text


def test_json_schema_keys_and_status_overlay():
    report = make_report(param("a.weight", 5e3), param("b.weight", 1.0), param("c.weight", None))
    doc = json.loads(json_report.dumps(report.to_dict()))
    assert doc["version"] == 1 and doc["tool"] == "gradscope"
    assert set(doc["summary"]) >= {
        "model",
        "parameters",
        "tensors",
        "loss",
        "duration_s",
        "verdict",
        "counts",
    }
    statuses = {p["name"]: p["status"] for p in doc["parameters"]}
    assert statuses == {"a.weight": "exploding", "b.weight": "ok", "c.weight": "none"}
    f = doc["findings"][0]
    assert set(f) == {
        "rule",
        "slug",
        "severity",
        "subject",
        "message",
        "advice",
        "value",
        "threshold",
        "evidence",
        "ignored_by",
        "table_row",
    }
