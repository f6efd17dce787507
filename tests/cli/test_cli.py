"""The real CLI: exit codes, the JSON document, every bad-target case, cheap --help."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from gradscope.cli import app

GOOD = """
import torch
from torch import nn

def gradscope_target():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)), torch.randn(3, 4)

def as_dict():
    model, batch = gradscope_target()
    return {"model": model, "batch": batch, "loss_fn": lambda out: out.pow(2).mean()}

def unused():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.used = nn.Linear(4, 1)
            self.unused = nn.Linear(4, 1)
        def forward(self, x):
            return self.used(x).sum()
    return M(), torch.randn(2, 4)

def wrong_type():
    return 42

def not_a_module():
    return "model", torch.randn(2)

def factory_raises():
    raise RuntimeError("no data here")

class Crashes(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)
    def forward(self, x):
        return self.fc(x) @ torch.ones(3, 3)  # shape error on purpose

def forward_raises():
    return Crashes(), torch.randn(2, 4)
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "model.py").write_text(GOOD)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def invoke(runner, *args):
    return runner.invoke(app, ["inspect", *args], catch_exceptions=False)


def test_healthy_file_target_exit_0(runner, project):
    result = invoke(runner, "model.py")
    assert result.exit_code == 0, result.output
    assert "verdict: OK" in result.stdout
    assert "0.weight" in result.stdout


def test_findings_exit_1_and_fail_on(runner, project):
    assert invoke(runner, "model.py:unused").exit_code == 1
    assert invoke(runner, "model.py:unused", "--fail-on", "never").exit_code == 0
    assert invoke(runner, "frozen-layers").exit_code == 0  # info < error
    assert invoke(runner, "frozen-layers", "--fail-on", "info").exit_code == 1


def test_json_document_shape(runner, project):
    result = invoke(runner, "model.py:unused", "--format", "json")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert doc["version"] == 1
    assert {"version", "findings", "parameters", "summary", "thresholds"} <= set(doc)
    (f,) = [f for f in doc["findings"] if f["rule"] == "GS101" and f["subject"] == "unused.weight"]
    assert {"rule", "severity", "subject", "message"} <= set(f) and f["severity"] == "error"
    params = {p["name"]: p for p in doc["parameters"]}
    assert params["unused.weight"]["grad_norm"] is None
    assert params["unused.weight"]["status"] == "none"
    assert params["used.weight"]["status"] == "ok" and params["used.weight"]["shape"] == [1, 4]
    assert isinstance(params["used.weight"]["grad_norm"], float)


def test_json_is_strict_for_non_finite_values(runner):
    result = invoke(runner, "nan-loss", "--format", "json")
    doc = json.loads(result.stdout, parse_constant=lambda c: pytest.fail(f"non-JSON {c}"))
    assert doc["summary"]["loss"] == "-inf"
    assert doc["parameters"][0]["grad_norm"] == "nan"


def test_output_file_is_written(runner, project):
    result = invoke(runner, "model.py:as_dict", "--format", "json", "--output", "r.json")
    assert result.exit_code == 0 and result.stdout == ""
    assert (
        json.loads((project / "r.json").read_text())["summary"]["loss_source"] == "loss_fn(output)"
    )
    result = invoke(runner, "model.py:as_dict", "-o", "r.txt")
    assert "verdict: OK" in (project / "r.txt").read_text()


def test_module_spec_from_current_directory(runner, project):
    assert invoke(runner, "model:as_dict").exit_code == 0


def test_module_spec_is_the_file_of_this_folder_not_one_imported_before(
    runner, project, tmp_path, monkeypatch
):
    """A `model.py` of another folder imported earlier in the process (the API, a test
    run) is not what `model:as_dict` builds: the name finds this folder's file."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "model.py").write_text("def unrelated():\n    pass\n")
    monkeypatch.chdir(other)
    monkeypatch.delitem(sys.modules, "model", raising=False)
    assert invoke(runner, "model.py:unrelated").exit_code != 0  # not a target, imported
    assert os.path.dirname(sys.modules["model"].__file__) == str(other)
    monkeypatch.chdir(project)
    assert invoke(runner, "model:as_dict").exit_code == 0


def line_of(text: str) -> int:
    return next(i for i, line in enumerate(GOOD.splitlines(), 1) if text in line)


RAISE_LINE = line_of('raise RuntimeError("no data here")')
FORWARD_LINE = line_of("@ torch.ones(3, 3)")

BAD = [
    (["missing.py"], "missing.py: no such file"),
    (["model.py:nope"], "model.py has no attribute `nope`"),
    (["model.py:wrong_type"], "returned int; expected (model, batch)"),
    (["model.py:not_a_module"], "model is str, not a torch.nn.Module"),
    (
        ["model.py:factory_raises"],
        f"model.py:{RAISE_LINE}: model.py:factory_raises() raised RuntimeError: no data here",
    ),
    (["model.py:forward_raises"], f"model.py:{FORWARD_LINE}: forward pass raised RuntimeError"),
    (["no_such_module:thing"], "no module named 'no_such_module'"),
    (["not a target"], "is not a .py file, a module or a built-in example"),
    (
        ["model.py", "--fail-on", "sometimes"],
        "--fail-on: 'sometimes' is not one of info, warning, error, never",
    ),
]


@pytest.mark.parametrize("args, message", BAD)
def test_bad_targets_exit_2_with_one_line(runner, project, args, message):
    result = invoke(runner, *args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stdout == ""


def test_syntax_and_import_errors(runner, project):
    (project / "broken.py").write_text("def f(:\n    pass\n")
    (project / "raises.py").write_text("import torch\nraise ImportError('needs gpu lib')\n")
    result = invoke(runner, "broken.py")
    assert (
        result.exit_code == 2
        and "broken.py:1: importing broken.py raised SyntaxError" in result.stderr
    )
    result = invoke(runner, "raises.py:build")
    assert (
        result.exit_code == 2
        and "raises.py:2: importing raises.py raised ImportError: needs gpu lib" in result.stderr
    )
    result = invoke(runner, "raises.py")  # no gradscope_target: run as a script
    assert result.exit_code == 2
    assert "raises.py:2: running raises.py raised ImportError: needs gpu lib" in result.stderr


def test_debug_shows_user_frames_only(runner, project):
    result = invoke(runner, "model.py:forward_raises", "--debug")
    assert result.exit_code == 2
    assert "Traceback" in result.stderr and f'model.py", line {FORWARD_LINE}' in result.stderr
    assert "gradscope/inspector/probe.py" not in result.stderr


def test_bad_config_exit_2(runner, project):
    (project / "bad.toml").write_text("[thresholds]\nexplode-norm = 1e3\nexplode-nrom = 5\n")
    result = invoke(runner, "model.py", "--config", "bad.toml")
    assert result.exit_code == 2
    assert "bad.toml:3: thresholds.explode-nrom: unknown key" in result.stderr
    (project / "broken.toml").write_text("[thresholds\n")
    result = invoke(runner, "model.py", "--config", "broken.toml")
    assert result.exit_code == 2 and "broken.toml: invalid TOML" in result.stderr


def test_unwritable_output_exit_2_and_no_file(runner, project):
    result = invoke(runner, "model.py", "-o", "no/such/dir/r.json")
    assert result.exit_code == 2 and "cannot write" in result.stderr
    assert not (project / "no").exists()


def test_threshold_flag_wins(runner, project):
    result = invoke(runner, "healthy-mlp", "--format", "json", "--explode-norm", "0.01")
    doc = json.loads(result.stdout)
    assert result.exit_code == 1 and doc["thresholds"]["explode-norm"] == 0.01
    assert {f["rule"] for f in doc["findings"]} == {"GS104"}


def test_large_model_table_is_truncated(runner):
    result = invoke(runner, "exploding-deep", "--top", "5")
    assert "showing 5 of 48 parameter tensors" in result.stdout
    result = invoke(runner, "exploding-deep", "--all")
    assert "showing" not in result.stdout and "46.weight" in result.stdout


def test_examples_and_rules_commands(runner):
    result = runner.invoke(app, ["examples"])
    assert result.exit_code == 0 and "detached-middle" in result.stdout
    result = runner.invoke(app, ["rules", "none-grad"])
    assert result.exit_code == 0 and "GS101" in result.stdout and "grad is None" in result.stdout
    assert runner.invoke(app, ["rules", "GS999"]).exit_code == 2


def run_module(*args, **kw):
    return subprocess.run(
        [sys.executable, "-m", "gradscope", *args], capture_output=True, text=True, **kw
    )


@pytest.mark.slow
def test_help_and_version_do_not_import_torch():
    code = (
        "import sys; sys.argv=['gradscope', '--help']\n"
        "from gradscope.cli import app\n"
        "try:\n    app()\nexcept SystemExit:\n    pass\n"
        "print('TORCH', 'torch' in sys.modules, 'matplotlib' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "TORCH False False" in out.stdout
    for flag in ("--help", "--version"):
        assert run_module(flag).returncode == 0
    assert run_module("inspect", "--help").returncode == 0


@pytest.mark.slow
def test_python_dash_m_runs_an_example_end_to_end(tmp_path):
    result = run_module(
        "inspect",
        "unused-submodule",
        "--format",
        "json",
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    assert result.returncode == 1, result.stderr
    assert json.loads(result.stdout)["summary"]["counts"]["error"] == 2
    assert result.stderr.strip() == ""


def test_ctrl_c_in_user_code_exits_130(runner, project):
    (project / "slow.py").write_text(
        textwrap.dedent("""
        import torch
        from torch import nn

        class Slow(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(2, 2)
            def forward(self, x):
                raise KeyboardInterrupt

        def gradscope_target():
            return Slow(), torch.randn(1, 2)
        """)
    )
    result = invoke(runner, "slow.py")
    assert result.exit_code == 130 and "interrupted" in result.stderr
