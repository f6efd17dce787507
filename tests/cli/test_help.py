"""Every command speaks the same language in its help, and --help stays cheap."""

from __future__ import annotations

import re

import pytest

import gradscope
from gradscope.cli import app

COMMANDS = ["inspect", "check", "gradcheck", "graph", "examples", "rules"]


@pytest.mark.parametrize("command", COMMANDS)
def test_help_has_no_python_types_and_one_usage_style(runner, command):
    text = runner.invoke(app, [command, "--help"], env={"COLUMNS": "100"}).stdout
    usage = text.splitlines()[0]
    assert "{" not in usage and re.fullmatch(r"Usage: gradscope \w+ \[OPTIONS\]( \S+)?", usage)
    assert not re.search(r"<(str|int|float|bool|list\[)", text), text
    if command in ("inspect", "check", "gradcheck", "graph"):
        assert re.search(r"-o, --output(, --out)? FILE", text)
    if command in ("inspect", "check"):
        assert "--fail-on LEVEL" in text


def test_fail_on_shows_its_default(runner):
    text = runner.invoke(app, ["inspect", "--help"], env={"COLUMNS": "200"}).stdout
    assert "[default: (error, or the config's fail-on)]" in " ".join(text.split())


def test_graph_takes_output_like_every_command(runner, tmp_path):
    out = tmp_path / "g.dot"
    result = runner.invoke(app, ["graph", "healthy-mlp", "--output", str(out), "--no-probe"])
    assert result.exit_code == 0, result.output
    assert out.read_text().startswith("digraph")
    legacy = runner.invoke(app, ["graph", "healthy-mlp", "--out", str(out), "--no-probe"])
    assert legacy.exit_code == 0


def test_rules_are_listed_in_id_order(runner):
    ids = re.findall(r"^(GS\d+) ", runner.invoke(app, ["rules"]).stdout, flags=re.M)
    assert ids == sorted(ids) and {"GS110", "GS201", "GS301"} <= set(ids)


def test_dir_lists_the_lazy_public_names():
    assert {"inspect", "inspect_target", "Severity", "Report", "ExitCode"} <= set(dir(gradscope))


@pytest.mark.slow
def test_no_commands_help_imports_pydantic_torch_or_matplotlib():
    """typer checks values with pydantic: built at a parameter's first value, never for
    --help (it was half of `watch --help`'s start-up; docs/performance.md)."""
    import subprocess
    import sys

    code = (
        "import sys\nfrom gradscope.cli import app\n"
        f"for command in {[*COMMANDS, 'watch', 'diff']!r}:\n"
        "    try:\n        app([command, '--help'], prog_name='gradscope')\n"
        "    except SystemExit:\n        pass\n"
        "heavy = ('pydantic', 'torch', 'matplotlib', 'importlib.metadata')\n"
        "print('LOADED', sorted(m for m in heavy if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "LOADED []" in out.stdout, out.stdout[-300:] + out.stderr[-2000:]


def test_values_are_still_checked_after_help_is_cheap(runner):
    result = runner.invoke(app, ["inspect", "healthy-mlp", "--top", "many"])
    assert result.exit_code == 2 and "'--top'" in result.output and "integer" in result.output
    result = runner.invoke(app, ["watch", "x.py", "--steps", "0"])
    assert result.exit_code == 2 and "--steps" in result.output


def _option_help(runner, command: str, option: str) -> str:
    """The help of one option, its wrapped lines joined onto one."""
    text = runner.invoke(app, [command, "--help"]).stdout
    lines = text[text.index("\nOptions:") :].splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(rf"\s+(-\w, )*{option}\b", line))
    block = [lines[start]]
    for line in lines[start + 1 :]:
        if not re.match(r" {10}", line):  # the option's text goes on indented
            break
        block.append(line)
    return " ".join(" ".join(block).split())


@pytest.mark.parametrize("command", ["inspect", "watch", "diff"])
def test_plot_help_names_exactly_the_formats_plot_takes(runner, command):
    from gradscope.api.pictures import PLOT_FORMATS

    text = _option_help(runner, command, "--plot")
    assert set(re.findall(r"\.(png|svg|pdf|jpg|eps|gif)\b", text)) == set(PLOT_FORMATS)


def test_graph_help_names_exactly_the_formats_and_extensions_it_takes(runner):
    from gradscope.graph.build import EXTENSIONS, FORMATS

    output = _option_help(runner, "graph", "--output")
    assert set(re.findall(r"(\.[a-z]+)\b", output)) == set(EXTENSIONS)
    said = _option_help(runner, "graph", "--format")
    assert [f for f in FORMATS if re.search(rf"\b{f}\b", said)] == list(FORMATS)


def test_against_help_names_the_compressed_log_it_reads(runner):
    assert ".jsonl.gz" in _option_help(runner, "watch", "--against")
