"""`gradscope check`: configured targets, CI reporters, baselines."""

from __future__ import annotations

import json
import os
import textwrap
import xml.etree.ElementTree as ET

import pytest
from junitparser import Error, Failure, JUnitXml

from gradscope.cli import app

MODEL = """
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self, scale=1.0):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.aux = nn.Linear(4, 2)    # never called
        self.scale = scale
    def forward(self, x):
        return (self.body(x) * self.scale).pow(2).mean()

def build():
    torch.manual_seed(0)
    return Net(), torch.randn(8, 4)

def build_scaled():
    torch.manual_seed(0)
    return Net(scale=100.0), torch.randn(8, 4)
"""

CONFIG = """
[tool.gradscope]
fail-on = "error"
[[tool.gradscope.inspect]]
target = "healthy-mlp"
[[tool.gradscope.inspect]]
target = "models/net.py:build"
{ignore}
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "net.py").write_text(MODEL)
    (tmp_path / "pyproject.toml").write_text(CONFIG.format(ignore=""))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    return tmp_path


def check(runner, *args):
    return runner.invoke(app, ["check", *args], catch_exceptions=False)


def test_check_mixes_passing_and_failing_targets(runner, project):
    result = check(runner)
    assert result.exit_code == 1, result.output
    assert "PASS          inspect healthy-mlp" in result.stdout
    assert "FAIL          inspect models/net.py:build" in result.stdout
    assert "aux.weight" in result.stdout
    assert "verdict: FAIL  (1 of 2 targets passed, exit code 1)" in result.stdout


def test_scoped_ignore_makes_it_pass(runner, project):
    (project / "pyproject.toml").write_text(CONFIG.format(ignore='ignore = ["none-grad:aux.*"]'))
    assert check(runner).exit_code == 0


def test_check_from_a_subfolder_resolves_targets_against_the_config(runner, project, monkeypatch):
    (project / "src").mkdir()
    monkeypatch.chdir(project / "src")
    assert check(runner).exit_code == 1


def test_nothing_configured_is_exit_2(runner, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = check(runner)
    assert result.exit_code == 2 and "nothing to check" in result.stderr


def test_broken_target_is_an_error_but_others_still_run(runner, project):
    (project / "ci.toml").write_text(
        textwrap.dedent("""
        [[inspect]]
        target = "missing.py"
        [[inspect]]
        target = "healthy-mlp"
        """)
    )
    result = check(runner, "--config", "ci.toml", "--format", "json")
    doc = json.loads(result.stdout)
    assert result.exit_code == 2
    assert [r["passed"] for r in doc["results"]] == [False, True]
    assert "no such file" in doc["results"][0]["error"]


def test_junit_parsed_back_with_the_right_counts(runner, project):
    (project / "ci.toml").write_text(
        textwrap.dedent("""
        [[inspect]]
        target = "healthy-mlp"
        [[inspect]]
        target = "models/net.py:build"
        [[inspect]]
        target = "missing.py"
        [[inspect]]
        target = "frozen-layers"
        """)
    )
    result = check(runner, "--config", "ci.toml", "--format", "junit", "--output", "r.xml")
    assert result.exit_code == 2 and result.stdout == ""
    xml = JUnitXml.fromfile(str(project / "r.xml"))
    suite = next(iter(xml))
    assert (suite.tests, suite.failures, suite.errors) == (4, 1, 1)
    cases = {case.name: case for case in suite}
    assert set(cases) == {"healthy-mlp", "models/net.py:build", "missing.py", "frozen-layers"}
    (failure,) = cases["models/net.py:build"].result
    assert isinstance(failure, Failure) and failure.type == "GS101"
    assert "aux.weight" in failure.text and "aux.bias" in failure.text
    assert failure.text.count("advice:") == 1  # one problem, one paragraph
    assert isinstance(cases["missing.py"].result[0], Error)
    assert cases["frozen-layers"].is_passed
    assert "GS107" in ET.parse(project / "r.xml").find(".//system-out").text


def test_markdown_and_step_summary(runner, project, monkeypatch):
    summary = project / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = check(runner, "--format", "markdown")
    assert result.exit_code == 1
    assert "| ❌ | `models/net.py:build` | inspect | 2 error | " in result.stdout
    # grouped as in the terminal: one row for the two None grads of one unused module
    assert (
        "| error | GS101 none-grad | `aux.weight`, `aux.bias` | 2 subjects, e.g." in result.stdout
    )
    assert result.stdout.count("GS101") == 1
    assert summary.read_text() == "earlier step\n" + result.stdout


def test_github_annotations(runner, project, monkeypatch):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    result = check(runner)
    lines = [line for line in result.stdout.splitlines() if line.startswith("::")]
    assert len(lines) == 1  # one problem (the unused module), not one per parameter
    assert lines[0].startswith(
        "::error file=models/net.py,title=gradscope GS101 none-grad in "
        "models/net.py%3Abuild::2 subjects: aux.weight, aux.bias; e.g. grad of aux.weight is None"
    )
    net = project / "models" / "net.py"  # a cut the evidence places: on its line
    net.write_text(MODEL.replace("return (self.body(x)", "return (self.body(x).detach()"))
    lines = [line for line in check(runner).stdout.splitlines() if line.startswith("::")]
    line = MODEL.splitlines().index("        return (self.body(x) * self.scale).pow(2).mean()") + 1
    assert [x.split("::")[1].split(",title=")[0] for x in lines] == [
        f"error file=models/net.py,line={line}",  # body.weight, body.bias: cut by .detach()
        "error file=models/net.py",  # aux.weight, aux.bias: never ran
    ]
    result = check(runner, "--format", "json")  # stdout stays pure JSON
    json.loads(result.stdout)
    assert "::error" in result.stderr


def test_inspect_speaks_junit_and_markdown_too(runner, project):
    result = runner.invoke(app, ["inspect", "unused-submodule", "--format", "junit"])
    assert result.exit_code == 1
    suite = ET.fromstring(result.stdout).find("testsuite")
    assert suite.get("failures") == "1"
    result = runner.invoke(app, ["inspect", "healthy-mlp", "--format", "markdown"])
    assert result.exit_code == 0 and "1 passed, 0 failed" in result.stdout


def test_baseline_unchanged_new_finding_and_norm_regression(runner, project):
    result = check(runner, "--write-baseline", "base.json")
    assert result.exit_code == 0  # adopting a baseline is a success, and says so
    assert "wrote the baseline base.json: 2 finding(s) recorded" in result.stderr
    assert "FAIL" not in result.stdout + result.stderr  # every line says what the baseline
    assert "[2/2] PASS inspect models/net.py:build" in result.stderr  # made of the findings
    assert "2 finding(s) adopted into the baseline)" in result.stderr
    assert "2 finding(s) already in the baseline" in result.stdout
    assert "verdict: PASS  (2 of 2 targets passed, exit code 0)" in result.stdout
    doc = json.loads((project / "base.json").read_text())
    assert doc["kind"] == "baseline"
    assert ["GS101", "aux.weight"] in doc["targets"]["inspect:models/net.py:build"]["findings"]

    result = check(runner, "--baseline", "base.json")  # unchanged model: known issues only
    assert result.exit_code == 0, result.stdout
    assert "2 finding(s) already in the baseline" in result.stdout

    net = project / "models" / "net.py"  # a new finding: a frozen-but-needed layer
    net.write_text(MODEL.replace("return (self.body(x)", "return (self.body(x).detach()"))
    result = check(runner, "--baseline", "base.json", "--format", "json")
    assert result.exit_code == 1
    (target,) = [r for r in json.loads(result.stdout)["results"] if "net.py" in r["target"]]
    assert {(f["rule"], f["subject"]) for f in target["findings"]} >= {
        ("GS101", "body.weight"),
        ("GS101", "body.bias"),
    }

    net.write_text(MODEL)  # a norm regression beyond the factor
    (project / "pyproject.toml").write_text(
        CONFIG.format(ignore="")
        .replace('target = "models/net.py:build"', 'target = "models/net.py:build_scaled"')
        .replace('fail-on = "error"', 'fail-on = "error"\nbaseline-factor = 10')
    )
    base = json.loads((project / "base.json").read_text())
    base["targets"]["inspect:models/net.py:build_scaled"] = base["targets"].pop(
        "inspect:models/net.py:build"
    )
    (project / "base.json").write_text(json.dumps(base))
    result = check(runner, "--baseline", "base.json", "--format", "json")
    assert result.exit_code == 1
    (target,) = [r for r in json.loads(result.stdout)["results"] if "net.py" in r["target"]]
    changes = [f for f in target["findings"] if f["rule"] == "GS110"]
    assert {f["subject"] for f in changes} == {"body.weight", "body.bias"}
    assert changes[0]["value"] == pytest.approx(1e4, rel=0.01)  # x100 scale, squared loss


def test_write_baseline_every_format_and_line_agrees_with_the_verdict(runner, project):
    """Writing a baseline adopts today's findings: each target is judged as the next run
    against that baseline will judge it, in the progress lines, the report, JUnit and
    markdown alike; the file records the findings, never a norm change against an older
    baseline."""
    result = check(runner, "--write-baseline", "b.json", "-o", "-", "-o", "r.xml", "-o", "r.md")
    assert result.exit_code == 0
    assert ET.parse(project / "r.xml").getroot().get("failures") == "0"
    assert "2 passed, 0 failed, 0 could not run" in (project / "r.md").read_text()
    assert "(in baseline)" in (project / "r.md").read_text()  # what was adopted, listed
    (project / "pyproject.toml").write_text(
        CONFIG.format(ignore="").replace("build", "build_scaled")
    )
    base = json.loads((project / "b.json").read_text())
    base["targets"]["inspect:models/net.py:build_scaled"] = base["targets"].pop(
        "inspect:models/net.py:build"
    )
    (project / "b.json").write_text(json.dumps(base))
    result = check(runner, "--baseline", "b.json", "--write-baseline", "c.json")
    assert result.exit_code == 0, result.output
    assert "[2/2] PASS inspect models/net.py:build_scaled" in result.stderr
    # what the run found is recorded; the norm changes against b.json are adopted as the
    # new norms, not as findings a later GS110 on the same parameter would hide behind
    assert "wrote the baseline c.json: 4 finding(s) recorded" in result.stderr
    assert "6 finding(s) adopted into the baseline" in result.stderr
    assert "verdict: PASS" in result.stdout and "FAIL" not in result.stdout
    written = json.loads((project / "c.json").read_text())["targets"]
    rules = {rule for rule, _ in written["inspect:models/net.py:build_scaled"]["findings"]}
    assert rules == {"GS101", "GS104"}  # the unused module, the scaled gradients: no GS110


def test_each_run_s_workers_print_where_that_run_s_prints_go_and_see_its_environment(
    project, capfd, monkeypatch
):
    """The workers come from a fork server started once (by the first run) with that run's
    stdout and environment; a later run's target prints where that run sends prints (to
    stderr while a report is on stdout) and reads that run's environment variables."""
    from gradscope import config
    from gradscope.api.checking import run_entry
    from gradscope.gate.check import run_isolated

    (project / "models" / "loud.py").write_text(
        "import os\nfrom gradscope.examples.models import healthy_mlp\n"
        "def build():\n    print('loud target', os.environ.get('LOUD_TAG'))\n"
        "    return healthy_mlp()\n"
    )
    (project / "pyproject.toml").write_text(
        '[[tool.gradscope.inspect]]\ntarget = "models/loud.py:build"\n'
    )
    settings = config.load(None)
    monkeypatch.setenv("LOUD_TAG", "first")
    assert run_isolated(settings, run_entry).results[0].could_not_run is None
    first = capfd.readouterr()
    assert "loud target first" in first.out and "loud target" not in first.err
    monkeypatch.setenv("LOUD_TAG", "second")
    saved = os.dup(1)
    os.dup2(2, 1)  # what user_stdout_to_stderr does to fd 1 when a report is on stdout
    try:
        run_isolated(settings, run_entry)
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    second = capfd.readouterr()
    assert "loud target second" in second.err and "loud target" not in second.out


def test_bad_baseline_file_is_exit_2(runner, project):
    (project / "b.json").write_text("{not json")
    result = check(runner, "--baseline", "b.json")
    assert result.exit_code == 2 and "b.json:1: not a JSON baseline" in result.stderr
    (project / "b.json").write_text('{"kind": "report"}')
    assert "not a gradscope baseline" in check(runner, "--baseline", "b.json").stderr


def test_gradcheck_entries_in_check(runner, project):
    (project / "ci.toml").write_text(
        textwrap.dedent("""
        [[gradcheck]]
        target = "gradscope.examples.functions:CustomReLU"
        [[gradcheck]]
        target = "gradscope.examples.functions:SquareMissingFactor"
        shape = { x = [5] }
        [[gradcheck]]
        target = "gradscope.examples.functions:NoSuchThing"
        """)
    )
    result = check(runner, "--config", "ci.toml", "--format", "json")
    assert result.exit_code == 2
    ok, broken, missing = json.loads(result.stdout)["results"]
    assert ok["passed"] and ok["document"]["passed"]
    (f,) = broken["findings"]
    assert f["rule"] == "GS201" and f["message"].endswith("constant-factor")
    assert f["subject"] == "gradscope.examples.functions:SquareMissingFactor: x (arg 0) -> out"
    assert "analytical" in f["evidence"][0]
    assert broken["document"]["targets"][0]["inputs"][0]["shape"] == [5]
    assert missing["error"] and "NoSuchThing" in missing["error"]
    result = check(runner, "--config", "ci.toml", "--format", "junit")
    suite = ET.fromstring(result.stdout).find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "1", "1")


def test_ctrl_c_during_check_is_one_line_and_130_from_every_process(tmp_path):
    """Ctrl-C reaches the whole process group, the check's worker included."""
    import os
    import signal
    import subprocess
    import sys
    import time

    (tmp_path / "slow.py").write_text(
        "import time, torch\nfrom torch import nn\n"
        "def gradscope_target():\n"
        "    open('started', 'w').close()\n"
        "    time.sleep(60)\n"
        "    return nn.Linear(2, 1), torch.randn(3, 2)\n"
    )
    (tmp_path / "gs.toml").write_text("[[inspect]]\ntarget = 'slow.py'\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gradscope", "check", "--config", "gs.toml"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's job
        # a suite started in the background (`make test &`) ignores SIGINT, and so would
        # the check: it would sleep out the target's minute and the test time out
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 90
    while not (tmp_path / "started").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert err.strip().splitlines()[-1] == "gradscope: error: interrupted"


@pytest.mark.parametrize("fmt", ["junit", "markdown"])
def test_a_lone_surrogate_or_nul_in_an_error_is_shown_not_fatal(runner, tmp_path, monkeypatch, fmt):
    """Text from the user's exception reaches every format as escapes: exit 2 (the target
    could not run), never 3, and the JUnit XML stays parseable. In-process: the runner's
    stdout encodes strictly as UTF-8, as a real one does (a lone surrogate written raw is
    an encoding error there too), and the target still runs in check's worker process."""
    (tmp_path / "t.py").write_text(
        "import torch\nfrom torch import nn\n"
        "class M(nn.Linear):\n"
        "    def forward(self, x):\n"
        "        raise ValueError('bad \\ud800 and nul \\x00 here')\n"
        "def gradscope_target():\n"
        "    return M(2, 1), torch.randn(3, 2)\n"
    )
    (tmp_path / "gs.toml").write_text("[[inspect]]\ntarget = 't.py'\n")
    monkeypatch.chdir(tmp_path)
    done = runner.invoke(app, ["check", "--config", "gs.toml", "-f", fmt])
    assert done.exit_code == 2, done.stderr_bytes.decode(errors="replace")
    out = done.stdout_bytes.decode("utf-8")  # strict: nothing undecodable was written
    assert "bad \\ud800 and nul \\x00 here" in out
    if fmt == "junit":
        error = ET.fromstring(out.split("\n", 1)[1]).find(".//error")
        assert error is not None and "\\x00" in error.get("message", "")
