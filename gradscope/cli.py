"""The command line: parse options, call the library, pick a reporter, set the exit code.

Importing this module must stay cheap (no torch): `gradscope --help` and
`--version` run it.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Optional

import typer

from . import __version__, clikit
from .examples import EXAMPLES
from .errors import ExitCode

EXAMPLE_LIST = "\n".join(f"  {e.name:18} {e.summary}" for e in EXAMPLES.values())

app = typer.Typer(
    name="gradscope", no_args_is_help=True, add_completion=False,
    rich_markup_mode=None, context_settings={"help_option_names": ["-h", "--help"]},
    help="Gradient diagnostics for PyTorch: None grads, NaN/Inf, exploding and vanishing "
         "gradients, custom autograd Functions, autograd graphs.\n\n"
         "Exit codes: 0 nothing at or above --fail-on, 1 findings at or above it, "
         "2 gradscope could not run (bad target or config, the user's code raised), "
         "130 interrupted.")


class InspectFormat(str, Enum):
    terminal = "terminal"
    json = "json"


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gradscope {__version__}")
        raise typer.Exit()


@app.callback()
def root(version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True, help="Print the version and exit.")] = False,
         ) -> None:
    """Gradient diagnostics for PyTorch."""


def _threshold(flag: str, text: str):  # noqa: ANN202 - Typer option factory
    return typer.Option(flag, metavar="X", help=text, rich_help_panel="Thresholds")


@app.command(epilog="Built-in examples (run by name; `gradscope examples` lists them):\n\n\b\n"
             + EXAMPLE_LIST)
def inspect(
    target: Annotated[str, typer.Argument(
        metavar="TARGET", help="path/file.py[:NAME], package.module[:NAME] or a built-in example name. NAME "
             "(default gradscope_target) returns (model, batch[, loss_fn]) or a dict.")],
    format: Annotated[InspectFormat, typer.Option(
        "--format", "-f", help="terminal (rich) or json (versioned schema).")
    ] = InspectFormat.terminal,
    output: clikit.OutputOpt = None,
    fail_on: clikit.FailOnOpt = None,
    config: clikit.ConfigOpt = None,
    top: Annotated[int, typer.Option(
        "--top", metavar="N", help="Parameter rows to show in the terminal report.")] = 30,
    all_rows: Annotated[bool, typer.Option("--all", help="Show every parameter row.")] = False,
    explain: Annotated[bool, typer.Option(
        "--explain/--no-explain",
        help="Replay the forward to locate what the cheap pass found (which op, which line).")
    ] = True,
    explode_norm: Annotated[Optional[float], _threshold(
        "--explode-norm", "GS104: gradient L2 norm above X is exploding.")] = None,
    explode_median_ratio: Annotated[Optional[float], _threshold(
        "--explode-median-ratio", "GS104: gradient RMS X times the model median.")] = None,
    vanish_norm: Annotated[Optional[float], _threshold(
        "--vanish-norm", "GS105: gradient L2 norm below X is vanishing.")] = None,
    vanish_depth_ratio: Annotated[Optional[float], _threshold(
        "--vanish-depth-ratio", "GS105: first/last layer gradient RMS below X.")] = None,
    width: Annotated[Optional[int], typer.Option(
        "--width", metavar="COLS", help="Terminal report width (default: the terminal's).")
    ] = None,
    debug: clikit.DebugOpt = False,
) -> None:
    """Run one forward and backward pass of TARGET and report its gradients.

    Prints a summary, findings (each tied to the troubleshooting table, with the
    evidence and what to do), and a per-parameter table.

    Examples:

      gradscope inspect healthy-mlp

      gradscope inspect models/net.py:build --format json -o report.json

      gradscope inspect mypkg.models:make_target --fail-on warning
    """
    with clikit.guarded(debug):
        from . import config as config_mod

        settings = config_mod.load(config, flags={
            "fail-on": fail_on, "explode-norm": explode_norm,
            "explode-median-ratio": explode_median_ratio, "vanish-norm": vanish_norm,
            "vanish-depth-ratio": vanish_depth_ratio})
        report = _run_inspect(target, settings, explain)
        _print_inspect(report, format, output, None if all_rows else top, width)
        raise typer.Exit(ExitCode.FINDINGS if report.failed(settings.fail_on) else ExitCode.OK)


def _run_inspect(target: str, settings, explain: bool):  # noqa: ANN001, ANN202
    from rich.console import Console

    from .api import inspect_target

    with Console(stderr=True).status(f"inspecting {target} ...", spinner="dots"):
        return inspect_target(target, settings, explain=explain)


def _print_inspect(report, format: InspectFormat, output: Optional[str],  # noqa: ANN001
                   top: Optional[int], width: Optional[int]) -> None:
    from .output import emit

    if format is InspectFormat.json:
        from .report import json as json_report

        emit(json_report.render(report), output)
        return
    from rich.console import Console

    from .report import terminal

    if output and output != "-":
        console = Console(record=True, width=width or 120, file=_Null(), color_system=None)
        terminal.render(report, console, top)
        emit(console.export_text(), output)
    else:
        import sys

        piped = width is None and not sys.stdout.isatty()
        terminal.render(report, Console(width=120 if piped else width, highlight=False), top)


class _Null:
    def write(self, _text: str) -> int:
        return 0

    def flush(self) -> None:
        pass


@app.command()
def examples() -> None:
    """List the built-in examples, runnable by name: gradscope inspect NAME."""
    for e in EXAMPLES.values():
        expect = f"  [expect: {e.expect}]" if e.expect else "  [healthy]"
        typer.echo(f"{e.name:18} {e.summary}{expect}")


@app.command()
def rules(rule: Annotated[Optional[str], typer.Argument(
        help="A rule id (GS101) or slug (none-grad); all rules when omitted.")] = None) -> None:
    """Explain gradscope's rules: id, slug, default severity and troubleshooting-table row."""
    from . import rules as rules_mod

    chosen = list(rules_mod.RULES.values())
    if rule:
        found = rules_mod.lookup(rule)
        if found is None:
            clikit.error(f"unknown rule {rule!r} (see `gradscope rules`)")
            raise typer.Exit(ExitCode.ERROR)
        chosen = [found]
    for r in chosen:
        row = rules_mod.TABLE[r.row]
        typer.echo(f"{r.id} {r.slug} ({r.severity}): {r.summary}\n"
                   f"    table: {row.symptom} | {row.cause} | {row.remedy}")


def main() -> None:
    import warnings

    # torch warns on import when numpy is absent; it says nothing about the user's model
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
