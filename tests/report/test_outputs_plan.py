"""One run, several outputs: each `-o` file in the format its extension names, the
terminal on stdout with `-o -`, the step summary once; --format and an extension that
disagree are one line, exit 2."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from gradscope.cli import app
from gradscope.errors import GradscopeError
from gradscope.report.outputs import Format, plan


def test_the_extension_names_the_format(tmp_path):
    names = ["r.json", "out.xml", "r.md", "r.txt", "R.JSON"]
    where = plan(None, [str(tmp_path / n) for n in names])
    assert [d.fmt for d in where.destinations] == [
        Format.json,
        Format.junit,
        Format.markdown,
        Format.terminal,
        Format.json,
    ]
    assert not where.to_stdout
    assert plan(Format.markdown, [str(tmp_path / "r.txt")]).destinations[0].fmt is Format.markdown
    assert plan(None, None).destinations[0] == plan(None, ["-"]).destinations[0]
    assert plan(None, None).to_stdout


def test_format_and_extension_that_disagree_are_refused(tmp_path):
    with pytest.raises(GradscopeError, match=r"--format json but -o .*out.xml names junit"):
        plan(Format.json, [str(tmp_path / "out.xml")])
    with pytest.raises(GradscopeError, match="names json"):
        plan(Format.terminal, [str(tmp_path / "r.json")])
    assert plan(Format.json, [str(tmp_path / "r.json")]).destinations[0].fmt is Format.json
    # with `-o -` the --format is stdout's: no contradiction
    both = plan(Format.markdown, ["-", str(tmp_path / "out.xml")])
    assert [(d.fmt, d.path is None) for d in both.destinations] == [
        (Format.markdown, True),
        (Format.junit, False),
    ]


def test_one_run_writes_terminal_junit_json_and_step_summary(runner, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    args = ["inspect", "frozen-layers", "--fail-on", "info"]
    outs = ["-o", "-", "-o", "r.json", "-o", "out.xml", "-o", "r.md"]
    result = runner.invoke(app, [*args, *outs], catch_exceptions=False)
    assert result.exit_code == 1
    assert "gradscope inspect · example frozen-layers" in result.stdout  # the terminal, on stdout
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["kind"] == "inspect" and doc["findings"]
    suite = ET.parse(tmp_path / "out.xml").getroot()
    assert suite.get("failures") == "1"  # the verdict of the exit code
    markdown = (tmp_path / "r.md").read_text()
    assert markdown.startswith("## gradscope") and summary.read_text() == markdown


def test_o_alone_follows_its_extension_and_disagreement_is_one_line(runner, tmp_path):
    report = tmp_path / "report.json"
    result = runner.invoke(app, ["inspect", "healthy-mlp", "-o", str(report)])
    assert result.exit_code == 0 and result.stdout == ""
    assert json.loads(report.read_text())["kind"] == "inspect"
    result = runner.invoke(app, ["inspect", "healthy-mlp", "-f", "json", "-o", "out.xml"])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "names junit by its extension" in result.stderr
