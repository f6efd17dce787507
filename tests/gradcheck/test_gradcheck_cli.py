"""`gradscope gradcheck` through the real command: exit codes, JSON, errors on stderr."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import typer

from gradscope.cli.gradcheck_cmd import gradcheck

FUNCTIONS = "gradscope.examples.functions"

USER_FILE = """
import torch
from torch.utils.checkpoint import CheckpointFunction


def gradcheck_inputs(name, dtype, generator):
    if name != "CheckpointFunction":
        return None
    return torch.sin, True, torch.randn(3, generator=generator, dtype=dtype,
                                         requires_grad=True)


class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return grad * 3 * x ** 2


class ForwardRaises(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view(7, 7)

    @staticmethod
    def backward(ctx, grad):
        return grad


def scaled(x, k: int):
    return x * k
"""


@pytest.fixture
def invoke(runner):
    app = typer.Typer()
    app.command("gradcheck")(gradcheck)

    @app.callback()
    def _root() -> None:
        """A root, so `gradcheck` stays a subcommand as in gradscope's app."""

    def run(*args: str):
        return runner.invoke(app, ["gradcheck", *args], catch_exceptions=False)

    return run


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "userfns.py").write_text(USER_FILE)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_passing_function_exits_0(invoke):
    result = invoke(f"{FUNCTIONS}:CustomReLU")
    assert result.exit_code == 0, result.output
    assert "PASS" in result.stdout and "input (arg 0)" in result.stdout


def test_broken_function_exits_1_with_diagnosis(invoke):
    result = invoke(f"{FUNCTIONS}:SquareMissingFactor")
    assert result.exit_code == 1
    assert "constant-factor" in result.stdout and "missing factor 2" in result.stdout


def test_json_document(invoke):
    result = invoke(f"{FUNCTIONS}:CustomReLU", f"{FUNCTIONS}:MulSwappedGrads", "--format", "json")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert (doc["version"], doc["command"], doc["passed"]) == (1, "gradcheck", False)
    good, bad = doc["targets"]
    assert (good["spec"], good["passed"], good["failures"]) == (f"{FUNCTIONS}:CustomReLU", True, [])
    first = bad["failures"][0]
    assert {"input", "output", "max_abs_error", "max_rel_error", "worst_index", "diagnosis"} <= set(
        first
    )
    assert (first["input"], first["input_position"], first["diagnosis"]) == ("x", 0, "wrong-order")
    assert set(first["worst_index"]) == {"output", "input"}


def test_several_specs_and_whole_module_discovery(invoke, project):
    result = invoke("userfns.py:Cube", "--format", "json")
    assert [t["spec"] for t in json.loads(result.stdout)["targets"]] == ["userfns.py:Cube"]
    # ForwardRaises rejects the generated 4x4 inputs: a usage problem for the whole run
    result = invoke("userfns.py", "--format", "json")
    assert result.exit_code == 2 and "userfns.py:ForwardRaises" in result.stderr


def test_module_level_inputs_convention_for_a_torch_function(invoke, project):
    result = invoke("userfns.py:CheckpointFunction", "userfns.py:Cube")
    assert result.exit_code == 0, result.output


def test_forward_that_rejects_generated_inputs_is_a_usage_error(invoke, project):
    result = invoke("userfns.py:ForwardRaises", "--format", "json")
    assert result.exit_code == 2 and result.stdout == ""
    line = USER_FILE.splitlines().index("        return x.view(7, 7)") + 1
    assert f"userfns.py:{line}" in result.stderr and "--shape" in result.stderr
    assert "generated inputs (x 4×4)" in result.stderr
    assert "Traceback" not in result.stderr
    debug = invoke("userfns.py:ForwardRaises", "--debug")
    assert debug.exit_code == 2 and f'userfns.py", line {line}' in debug.stderr
    assert "gradscope/gradcheck/jacobian.py" not in debug.stderr
    assert invoke("userfns.py:ForwardRaises", "--shape", "x=7,7").exit_code == 0


def test_shape_and_arg_options(invoke, project):
    result = invoke("userfns.py:scaled", "--shape", "x=2,3", "--arg", "k=3", "-f", "json")
    assert result.exit_code == 0, result.output
    target = json.loads(result.stdout)["targets"][0]
    assert target["inputs"][0]["shape"] == [2, 3]


@pytest.mark.parametrize(
    "args, message",
    [
        (["nosuch_module:Fn"], "no module named 'nosuch_module'"),
        ([f"{FUNCTIONS}:Nope"], "has no attribute `Nope`"),
        (["math:pi"], "is float, not a torch.autograd.Function subclass"),
        ([f"{FUNCTIONS}:CustomReLU", "--shape", "input=3,a"], "expected NAME=DIMS"),
        ([f"{FUNCTIONS}:CustomReLU", "--shape", "other=3"], "no parameter named `other`"),
        ([f"{FUNCTIONS}:CustomReLU", "--arg", "input=__import__('os')"], "is not a Python literal"),
        ([f"{FUNCTIONS}:CustomReLU", "--dtype", "int8"], "expected one of float64"),
        (["userfns.py:scaled"], "parameter `k` (int) has no default; pass --arg k=VALUE"),
        (["missing.py:Fn"], "missing.py: no such file"),
    ],
)
def test_bad_input_exits_2_with_one_line(invoke, project, args, message):
    result = invoke(*args)
    assert result.exit_code == 2
    assert message in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and result.stdout == ""


def test_config_entries_are_the_default_targets(invoke, project):
    (project / "gc.toml").write_text(
        textwrap.dedent("""
        [[gradcheck]]
        target = "userfns.py:scaled"
        shape = { x = [3] }
        args = { k = 2 }
        second-order = true
    """)
    )
    result = invoke("--config", "gc.toml", "-f", "json")
    assert result.exit_code == 0, result.output
    (target,) = json.loads(result.stdout)["targets"]
    assert [c["name"] for c in target["checks"]] == ["backward", "second-order"]
    assert target["inputs"][0]["shape"] == [3]


@pytest.mark.parametrize(
    "line, message",
    [
        ('seed = "x"', "gc.toml:3: gradcheck.seed: expected int"),
        ("shape = { x = [0] }", "gc.toml:3: gradcheck.shape: shape 'x=0': expected NAME=DIMS"),
    ],
)
def test_bad_config_entry_exits_2(invoke, project, line, message):
    (project / "gc.toml").write_text(f'[[gradcheck]]\ntarget = "userfns.py:Cube"\n{line}\n')
    result = invoke("--config", "gc.toml")
    assert result.exit_code == 2 and message in result.stderr, result.stderr


def test_options_apply_to_the_targets_that_take_them(invoke):
    result = invoke(
        f"{FUNCTIONS}:CustomReLU",
        f"{FUNCTIONS}:SquareMissingFactor",
        "--shape",
        "x=3",
        "-f",
        "json",
    )
    shapes = [t["inputs"][0]["shape"] for t in json.loads(result.stdout)["targets"]]
    assert shapes == [[4, 4], [3]] and result.exit_code == 1


def test_output_file(invoke, project):
    result = invoke(f"{FUNCTIONS}:CustomReLU", "-o", "report.txt")
    assert result.exit_code == 0 and result.stdout == ""
    assert "PASS" in (project / "report.txt").read_text()


@pytest.mark.slow
def test_importing_the_command_does_not_import_torch():
    code = "import sys, gradscope.cli.gradcheck_cmd; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
