"""`gradscope diff` through the real command line: exit codes, formats, help without torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gradscope.cli import app

HERE = os.path.dirname(__file__)
T = os.path.join(HERE, "diff_targets.py")


def spec(name: str) -> str:
    return f"{T}:{name}"


def run(runner, *args: str):
    return runner.invoke(app, ["diff", *args], env={"COLUMNS": "80"})


@pytest.mark.slow
def test_identical_port_exits_0(runner):
    result = run(runner, spec("gpt2_ref"), spec("gpt2_port"))
    assert result.exit_code == 0, result.output
    assert "verdict: IDENTICAL  (within tolerance: " in result.stdout


@pytest.mark.slow
def test_port_bug_exits_1_and_names_the_module(runner, tmp_path):
    out = tmp_path / "d.json"
    result = run(runner, spec("llama_ref"), spec("llama_port_rotary"), "-f", "json", "-o", str(out))
    assert result.exit_code == 1, result.output
    doc = json.loads(out.read_text())
    assert doc["kind"] == "diff" and doc["summary"]["origin"] == "layers.0.self_attn"


@pytest.mark.slow
def test_terminal_report_fits_80_columns(runner, tmp_path):
    png = tmp_path / "d.png"
    result = run(runner, spec("gpt2_ref"), spec("gpt2_port_residual"), "--plot", str(png))
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 80
    assert "the difference starts at h.1" in result.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_builtin_example_against_itself_under_autocast(runner):
    result = run(runner, "healthy-mlp", "--b-autocast", "bf16", "-f", "json")
    assert result.exit_code in (0, 1), result.output
    assert json.loads(result.stdout)["setting"] == "autocast bfloat16"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("healthy-mlp",), "give NEW"),
        (("healthy-mlp", "no_such_file.py"), "no such file"),
        (("healthy-mlp", "healthy-mlp", "--b-autocast", "int8"), "bf16 or fp16"),
        (("healthy-mlp", "healthy-mlp", "--name-map", "absent.toml"), "--name-map"),
        (("healthy-mlp", "vanishing-sigmoid"), "no parameter"),
        (("healthy-mlp", "healthy-mlp", "--plot", "x.txt"), ".png"),
    ],
)
def test_bad_input_exits_2_with_one_line(runner, args, message):
    result = run(runner, *args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_user_code_raising_is_2(runner):
    result = run(runner, "healthy-mlp", spec("broken"))
    assert result.exit_code == 2
    assert "cannot build" in result.stderr and "--debug" in result.stderr


def test_help_has_examples_and_imports_no_torch():
    code = (
        "import sys\nfrom gradscope.cli import app\n"
        "try:\n    app(['diff', '--help'])\nexcept SystemExit:\n    pass\n"
        "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH')"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "100"},
        check=False,
    ).stdout
    assert "gradscope diff reference.py:build port.py:build" in out
    assert out.strip().endswith("NO-TORCH")
