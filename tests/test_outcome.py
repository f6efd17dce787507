"""One outcome contract and one output path for every command.

Each command's result becomes an `Outcome` (kind, label, findings, ignored, could-not-run
reason, a JSON document that says its kind), one function turns outcomes into the exit
code, and one writer gives every command every format and the CI extras.
"""

from __future__ import annotations

import json
import os
import subprocess
import xml.etree.ElementTree as ET

import pytest

from gradscope.cli.root import app
from gradscope.errors import ExitCode
from gradscope.findings import RULES, Severity
from gradscope.outcome import Outcome, exit_code

WRONG_FN = "gradscope.examples.functions:SquareMissingFactor"
NO_ZERO_GRAD = os.path.join(os.path.dirname(__file__), "watcher", "scripts", "no_zero_grad.py")


def gradscope_cli(runner, monkeypatch, *args: str):
    """`gradscope ARGS` in-process at 80 columns, outside GitHub Actions: these tests read
    the documents and exit codes, which the runner gives as a launch does (the real
    process's exit codes are tested in tests/cli/)."""
    for name in [k for k in os.environ if k.startswith("GITHUB_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("NO_COLOR", "1")
    done = runner.invoke(app, list(args))
    return subprocess.CompletedProcess(args, done.exit_code, done.stdout, done.stderr)


def _finding(rule: str = "GS101", ignored_by: str | None = None):
    from dataclasses import replace

    found = RULES[rule].finding("fc.weight", "no gradient", "fix it")
    return replace(found, ignored_by=ignored_by) if ignored_by else found


@pytest.mark.parametrize(
    ("outcome", "fail_on", "code"),
    [
        (Outcome("inspect", "t"), Severity.ERROR, ExitCode.OK),
        (Outcome("inspect", "t", [_finding()]), Severity.ERROR, ExitCode.FINDINGS),
        (Outcome("inspect", "t", [_finding()]), None, ExitCode.OK),
        (Outcome("inspect", "t", [_finding("GS203")]), Severity.ERROR, ExitCode.OK),
        (Outcome("inspect", "t", [_finding("GS203")]), Severity.WARNING, ExitCode.FINDINGS),
        # an ignored finding is kept and shown, never failing
        (Outcome("inspect", "t", [_finding(ignored_by="GS101:*")]), Severity.INFO, ExitCode.OK),
        # a target that could not run is never a pass, nor "findings"
        (Outcome("watch", "t", [_finding()], could_not_run="crashed"), None, ExitCode.ERROR),
        # Ctrl-C and SIGTERM are their own codes, whatever else is true
        (
            Outcome("watch", "t", [_finding()], could_not_run="x", stopped_by=ExitCode.TERMINATED),
            Severity.ERROR,
            ExitCode.TERMINATED,
        ),
    ],
)
def test_one_exit_code_function(outcome, fail_on, code):
    assert exit_code([outcome], fail_on) == code


def test_ignored_findings_are_kept_apart_and_in_the_document():
    outcome = Outcome("watch", "train.py", [_finding(), _finding(ignored_by="GS101:fc.*")])
    assert len(outcome.findings) == 1 and len(outcome.ignored) == 1
    doc = outcome.to_dict()
    assert doc["kind"] == "watch" and doc["label"] == "train.py" and doc["version"] >= 1
    assert doc["ignored"][0]["ignored_by"] == "GS101:fc.*"


def test_adopting_a_baseline_records_findings_without_failing():
    outcomes = [Outcome("inspect", "t", [_finding()])]
    assert exit_code(outcomes, Severity.ERROR, adopting=True) == ExitCode.OK
    outcomes.append(Outcome("inspect", "u", could_not_run="no such file"))
    assert exit_code(outcomes, Severity.ERROR, adopting=True) == ExitCode.ERROR


def test_every_command_document_says_its_kind(runner, monkeypatch):
    inspect = gradscope_cli(
        runner, monkeypatch, "inspect", "detached-middle", "-f", "json", "--fail-on", "never"
    )
    gradcheck = gradscope_cli(runner, monkeypatch, "gradcheck", WRONG_FN, "-f", "json")
    for done, kind in ((inspect, "inspect"), (gradcheck, "gradcheck")):
        doc = json.loads(done.stdout)
        assert doc["kind"] == kind and doc["tool"] == "gradscope" and doc["label"]
        assert isinstance(doc["findings"], list) and isinstance(doc["ignored"], list)
    assert inspect.returncode == 0 and gradcheck.returncode == 1
    assert {f["rule"] for f in json.loads(gradcheck.stdout)["findings"]} == {"GS201"}


def test_gradcheck_fail_on_and_severity_agree_with_check(tmp_path, monkeypatch, runner):
    """A severity override means the same to `gradscope gradcheck` and to `gradscope check`:
    a wrong gradient demoted to a warning passes both, or fails both under --fail-on warning."""
    (tmp_path / "pyproject.toml").write_text(
        '[tool.gradscope]\nseverity = {GS201 = "warning"}\n'
        f'[[tool.gradscope.gradcheck]]\ntarget = "{WRONG_FN}"\n'
    )
    monkeypatch.chdir(tmp_path)

    def code(*args: str) -> int:
        return runner.invoke(app, list(args), catch_exceptions=False).exit_code

    assert code("gradcheck", WRONG_FN) == 0
    assert code("check") == 0
    assert code("gradcheck", WRONG_FN, "--fail-on", "warning") == 1
    assert code("check", "--fail-on", "warning") == 1
    monkeypatch.chdir(os.path.dirname(__file__))
    assert code("gradcheck", WRONG_FN, "--fail-on", "never") == 0


def test_watch_and_gradcheck_get_every_ci_format(tmp_path, monkeypatch, runner):
    """JUnit, markdown, the step summary and annotations come from the one writer."""
    summary = tmp_path / "summary.md"
    ci = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)}
    runs = {
        "watch": ("watch", NO_ZERO_GRAD),
        "gradcheck": ("gradcheck", WRONG_FN),
    }
    for name in [k for k in os.environ if k.startswith("GITHUB_")]:
        monkeypatch.delenv(name)
    for kind, args in runs.items():
        junit = runner.invoke(app, [*args, "-f", "junit"], env=ci, catch_exceptions=False)
        assert junit.exit_code == 1, junit.stderr
        case = ET.fromstring(junit.stdout).find("testsuite/testcase")
        assert case is not None and case.get("classname") == f"gradscope.{kind}"
        assert case.find("failure") is not None
        # the report holds stdout, so annotations go to stderr
        assert "::error " in junit.stderr and f"in {args[1]}" in junit.stderr.replace("%3A", ":")
        markdown = runner.invoke(app, [*args, "-f", "markdown"], env=ci, catch_exceptions=False)
        assert markdown.stdout.startswith("## gradscope") and "❌" in markdown.stdout
    assert summary.read_text().count("## gradscope") == 2


@pytest.mark.slow
def test_watch_keeps_ignored_findings(tmp_path, runner, monkeypatch):
    config = tmp_path / "gradscope.toml"
    config.write_text('ignore = ["GS412:*"]\n')
    done = gradscope_cli(
        runner, monkeypatch, "watch", NO_ZERO_GRAD, "-c", str(config), "-f", "json"
    )
    doc = json.loads(done.stdout)
    assert done.returncode == 0
    assert "GS412" not in {f["rule"] for f in doc["findings"]}
    assert {f["rule"] for f in doc["ignored"]} >= {"GS412"}
