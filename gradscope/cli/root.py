"""The command line: parse options, call the library, pick a reporter, set the exit code.

Importing this module must stay cheap (no torch): `gradscope --help` and
`--version` run it.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from gradscope import __version__
from gradscope.cli import common as clikit
from gradscope.cli.gradcheck_cmd import gradcheck
from gradscope.cli.graph_cmd import graph
from gradscope.cli.watch_cmd import watch
from gradscope.errors import ExitCode, GradscopeError
from gradscope.examples import EXAMPLES
from gradscope.report import outputs
from gradscope.report.outputs import Format

EXAMPLE_LIST = "\n".join(f"  {e.name:18} {e.summary}" for e in EXAMPLES.values())

app = typer.Typer(
    name="gradscope",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="Gradient diagnostics for PyTorch: None grads, NaN/Inf, exploding and vanishing "
    "gradients, custom autograd Functions, autograd graphs.\n\n"
    "Exit codes: 0 nothing at or above --fail-on, 1 findings at or above it, "
    "2 gradscope could not run (bad target or config, the user's code raised or called "
    "sys.exit), 3 gradscope itself failed (a bug: please report it), 130 interrupted.",
)


FormatOpt = Annotated[
    Format,
    typer.Option(
        "--format",
        "-f",
        help="terminal (rich), json (versioned schema), junit (XML for CI "
        "dashboards) or markdown (job summaries).",
    ),
]
WidthOpt = Annotated[
    int | None,
    typer.Option(
        "--width", metavar="COLS", help="Terminal report width (default: the terminal's)."
    ),
]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gradscope {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Gradient diagnostics for PyTorch."""


def _threshold(flag: str, text: str):
    return typer.Option(flag, metavar="X", help=text, rich_help_panel="Thresholds")


@app.command(
    epilog="Built-in examples (run by name; `gradscope examples` lists them):\n\n\b\n"
    + EXAMPLE_LIST,
    context_settings={"allow_extra_args": True},
)
def inspect(
    ctx: typer.Context,
    target: Annotated[
        str,
        typer.Argument(
            metavar="TARGET",
            help="path/file.py[:NAME], package.module[:NAME] or a built-in example name. NAME "
            "(default gradscope_target) returns (model, batch[, loss_fn]) or a dict.",
        ),
    ],
    format: FormatOpt = Format.terminal,
    output: clikit.OutputOpt = None,
    fail_on: clikit.FailOnOpt = None,
    config: clikit.ConfigOpt = None,
    top: Annotated[
        int,
        typer.Option("--top", metavar="N", help="Parameter rows to show in the terminal report."),
    ] = 30,
    all_rows: Annotated[bool, typer.Option("--all", help="Show every parameter row.")] = False,
    script: Annotated[
        bool,
        typer.Option(
            "--script",
            help="TARGET is a training script: run it (arguments after --) until its "
            "first backward() and inspect that step instead of running it.",
        ),
    ] = False,
    explain: Annotated[
        bool,
        typer.Option(
            "--explain/--no-explain",
            help="Replay the forward to locate what the cheap pass found (which op, which line).",
        ),
    ] = True,
    explode_norm: Annotated[
        float | None,
        _threshold("--explode-norm", "GS104: gradient L2 norm above X is exploding."),
    ] = None,
    explode_median_ratio: Annotated[
        float | None,
        _threshold("--explode-median-ratio", "GS104: gradient RMS X times the model median."),
    ] = None,
    vanish_norm: Annotated[
        float | None,
        _threshold("--vanish-norm", "GS105: gradient L2 norm below X is vanishing."),
    ] = None,
    vanish_depth_ratio: Annotated[
        float | None,
        _threshold("--vanish-depth-ratio", "GS105: first/last layer gradient RMS below X."),
    ] = None,
    width: WidthOpt = None,
    debug: clikit.DebugOpt = False,
) -> None:
    """Run one forward and backward pass of TARGET and report its gradients.

    Prints a summary, findings (each tied to the troubleshooting table, with the
    evidence and what to do), and a per-parameter table.

    Examples:

      gradscope inspect healthy-mlp

      gradscope inspect models/net.py:build --format json -o report.json

      gradscope inspect mypkg.models:make_target --fail-on warning

      gradscope inspect train.py --script -- --lr 0.1 --batch-size 32
    """
    with clikit.guarded(debug):
        from gradscope import config as config_mod

        settings = config_mod.load(
            config,
            flags={
                "fail-on": fail_on,
                "explode-norm": explode_norm,
                "explode-median-ratio": explode_median_ratio,
                "vanish-norm": vanish_norm,
                "vanish-depth-ratio": vanish_depth_ratio,
            },
        )
        if ctx.args and not script:
            raise GradscopeError(
                f"unexpected arguments {' '.join(ctx.args)!r} (arguments "
                "after -- are for a --script TARGET)"
            )
        report = _run_inspect(target, settings, explain, ctx.args if script else None)
        from gradscope.check import from_inspect

        outputs.write(
            format,
            from_inspect(report, settings.fail_on),
            output,
            width,
            inspect=report,
            top=None if all_rows else top,
        )
        raise typer.Exit(ExitCode.FINDINGS if report.failed(settings.fail_on) else ExitCode.OK)


def _run_inspect(target: str, settings, explain: bool, argv):
    """`argv` not None: TARGET is a script to run with those arguments."""
    from rich.console import Console

    from gradscope.api import inspect_script, inspect_target

    with Console(stderr=True).status(f"inspecting {target} ...", spinner="dots"):
        if argv is not None:
            return inspect_script(target, argv, settings)
        return inspect_target(target, settings, explain=explain)


@app.command()
def check(
    format: FormatOpt = Format.terminal,
    output: clikit.OutputOpt = None,
    fail_on: clikit.FailOnOpt = None,
    config: clikit.ConfigOpt = None,
    baseline: Annotated[
        str | None,
        typer.Option(
            "--baseline",
            metavar="FILE",
            help="Fail only on findings not in this baseline, or "
            "on gradient norms that changed by more than baseline-factor.",
        ),
    ] = None,
    write_baseline: Annotated[
        str | None,
        typer.Option("--write-baseline", metavar="FILE", help="Save this run as a baseline."),
    ] = None,
    width: WidthOpt = None,
    debug: clikit.DebugOpt = False,
) -> None:
    """Run every target configured in [tool.gradscope] (or --config): one combined report.

    Examples:

      gradscope check

      gradscope check --format junit --output gradscope.xml

      gradscope check --write-baseline .gradscope-baseline.json

      gradscope check --baseline .gradscope-baseline.json --format markdown
    """
    with clikit.guarded(debug):
        from gradscope import baseline as baseline_mod
        from gradscope import check as check_mod
        from gradscope import config as config_mod
        from gradscope.report import json as json_report
        from gradscope.report.write import write_atomic

        settings = config_mod.load(config, flags={"fail-on": fail_on})
        saved = baseline_mod.load(baseline) if baseline else None
        report = _run_check(check_mod, settings)
        if write_baseline:
            write_atomic(write_baseline, json_report.dumps(baseline_mod.build(report)))
        if saved is not None:
            report = baseline_mod.compare(report, saved, settings)
        outputs.write(format, report, output, width)
        raise typer.Exit(report.exit_code())


def _run_check(check_mod, settings):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    total = len(settings.inspect) + len(settings.gradcheck) + len(settings.watch)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, transient=True, console=_stderr_console()) as bar:
        task = bar.add_task("checking", total=total)

        def step(done: int, label: str) -> None:
            bar.update(task, description=label, completed=done)

        report = check_mod.run(settings, progress=step)
        bar.update(task, completed=total)
    return report


def _stderr_console():
    from rich.console import Console

    return Console(stderr=True)


@app.command()
def examples() -> None:
    """List the built-in examples, runnable by name: gradscope inspect NAME."""
    for e in EXAMPLES.values():
        expect = f"  [expect: {e.expect}]" if e.expect else "  [healthy]"
        typer.echo(f"{e.name:18} {e.summary}{expect}")


@app.command()
def rules(
    rule: Annotated[
        str | None,
        typer.Argument(help="A rule id (GS101) or slug (none-grad); all rules when omitted."),
    ] = None,
) -> None:
    """Explain gradscope's rules: id, slug, default severity and troubleshooting-table row."""
    from gradscope import findings as rules_mod

    chosen = list(rules_mod.RULES.values())
    if rule:
        found = rules_mod.lookup(rule)
        if found is None:
            clikit.error(f"unknown rule {rule!r} (see `gradscope rules`)")
            raise typer.Exit(ExitCode.ERROR)
        chosen = [found]
    for r in chosen:
        row = rules_mod.TABLE[r.row]
        typer.echo(
            f"{r.id} {r.slug} ({r.severity}): {r.summary}\n"
            f"    table: {row.symptom} | {row.cause} | {row.remedy}"
        )


app.command("gradcheck")(gradcheck)
app.command("graph")(graph)
app.command("watch", context_settings={"allow_extra_args": True})(watch)


def main() -> None:
    import warnings

    # torch warns on import when numpy is absent; it says nothing about the user's model
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    try:
        app()
    except SystemExit:
        raise
    except KeyboardInterrupt:
        clikit.error("interrupted")
        sys.exit(ExitCode.INTERRUPTED)
    except BaseException as exc:  # the last resort: whatever escaped every command's boundary
        clikit.report_internal_error(exc, debug="--debug" in sys.argv)
        sys.exit(ExitCode.INTERNAL)


if __name__ == "__main__":  # pragma: no cover
    main()
