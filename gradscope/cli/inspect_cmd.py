"""`gradscope inspect`: one instrumented forward and backward of a target, or of one step of a
training script; parse options, call gradscope.api, render, exit. No torch at import time."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from gradscope.cli import common as clikit
from gradscope.errors import GradscopeError
from gradscope.examples import EXAMPLES
from gradscope.report import outputs

EXAMPLE_LIST = "\n".join(f"  {e.name:18} {e.summary}" for e in EXAMPLES.values())
#: how cli.root registers the command: the examples in the epilog, script arguments after --
SETTINGS: dict[str, Any] = dict(
    epilog="Built-in examples (run by name; `gradscope examples` lists them):\n\n\b\n"
    + EXAMPLE_LIST,
    context_settings={"allow_extra_args": True},
)


def _threshold(flag: str, text: str):
    return typer.Option(flag, metavar="X", help=text, rich_help_panel="Thresholds")


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
    format: clikit.FormatOpt = None,
    output: clikit.OutputOpt = None,
    fail_on: clikit.FailOnOpt = None,
    config: clikit.ConfigOpt = None,
    top: Annotated[
        int,
        typer.Option(
            "--top", metavar="N", min=1, help="Parameter rows to show in the terminal report."
        ),
    ] = 30,
    all_rows: Annotated[bool, typer.Option("--all", help="Show every parameter row.")] = False,
    script: Annotated[
        bool,
        typer.Option(
            "--script",
            help="TARGET is a training script: run it (arguments after --) until its "
            "first backward() (or that of --step N) and inspect that step instead of running it.",
        ),
    ] = False,
    step: Annotated[
        str | None,
        typer.Option(
            "--step",
            metavar="N",
            help="With --script: inspect optimizer step N (1-based, as `gradscope watch` numbers "
            "them: every optimizer.step() is one, GradScaler-skipped ones too): the script runs "
            "its first N-1 steps and stops at the first backward() after them. "
            "`--step first-nonfinite`: the first step whose loss or gradients are NaN/Inf (the "
            "script runs once to find it and once more to stop there).",
        ),
    ] = None,
    explain: Annotated[
        bool,
        typer.Option(
            "--explain/--no-explain",
            help="Replay the forward to locate what the cheap pass found (which op, which "
            "line); for a --script step, watch its forward as it runs instead.",
        ),
    ] = True,
    explode_norm: Annotated[
        float | None,
        _threshold(
            "--explode-norm",
            "GS104: total gradient L2 norm over the model above X is exploding "
            "(scale-invariant weights feeding a norm layer left out; one tensor is "
            "judged by its RMS per element, explode-rms).",
        ),
    ] = None,
    explode_median_ratio: Annotated[
        float | None,
        _threshold(
            "--explode-median-ratio",
            "GS104: gradient RMS X times the model median (lookup tables vs lookup "
            "tables), for a tensor that runs before most of the model.",
        ),
    ] = None,
    vanish_norm: Annotated[
        float | None,
        _threshold("--vanish-norm", "GS105: gradient L2 norm below X is vanishing."),
    ] = None,
    vanish_depth_ratio: Annotated[
        float | None,
        _threshold("--vanish-depth-ratio", "GS105: first/last layer gradient RMS below X."),
    ] = None,
    plot: Annotated[
        str | None,
        typer.Option(
            "--plot",
            metavar="FILE",
            help="Also draw the gradient flow (per-parameter grad norm and grad/weight, log "
            "scale, coloured by status) to FILE.png, .svg or .pdf.",
        ),
    ] = None,
    width: clikit.WidthOpt = None,
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

      gradscope inspect --script train.py --step 3 -- --lr 0.1

      gradscope inspect --script train.py --step first-nonfinite
    """
    with clikit.guarded(debug):
        from gradscope import config as config_mod
        from gradscope.inspector.targets import DEFAULT_NAME, is_script
        from gradscope.outcome import exit_code
        from gradscope.report.write import distinct, write_file

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
        where = outputs.plan(format, output)
        plot_path, plot_format = plot_destination(plot)
        target_file = target.rpartition(":")[0] if ":" in target else target
        distinct({**where.paths(), "--plot": plot_path}, {"TARGET": target_file})
        prepared = None
        if not script and not ctx.args and step is None:
            from gradscope.inspector.model_file import prepare

            with clikit.user_stdout_to_stderr(where.to_stdout):
                prepared = prepare(target)  # a model class but no batch (model.py:Net)
        if prepared is not None:
            clikit.note(prepared.note)
        elif not script and is_script(target):
            script = True
            clikit.note(
                f"{target} defines no {DEFAULT_NAME}(): inspecting it as a training script "
                "(runs until its first backward; --script says so explicitly)"
            )
        if ctx.args and not script:
            raise GradscopeError(
                f"unexpected arguments {' '.join(ctx.args)!r} (arguments "
                "after -- are for a --script TARGET)"
            )
        if step is not None and not script:
            raise GradscopeError(f"--step {step}: --step is for a training script (--script)")
        which = parse_step(step)
        with clikit.user_stdout_to_stderr(where.to_stdout):
            argv = ctx.args if script else None
            report = _run_inspect(target, settings, explain, argv, which, prepared)
        outcome = report.outcome()
        code = exit_code([outcome], settings.fail_on)
        if script and _launched_rank() != 0:  # under torchrun, rank 0 alone reports
            raise typer.Exit(code)
        if plot_path:
            from gradscope.report.flow_plot import plot as flow_plot

            write_file(plot_path, flow_plot(report, plot_format))
            clikit.note(f"wrote {plot}")
        outputs.deliver(where, outcome, settings.fail_on, width, top=None if all_rows else top)
        raise typer.Exit(code)


def _launched_rank() -> int:
    from gradscope.distributed.context import env_rank

    return env_rank() or 0


PLOT_FORMATS = ("png", "svg", "pdf")


def plot_destination(path: str | None) -> tuple[str | None, str]:
    """Check --plot before anything runs: a writable FILE with a picture's extension."""
    from gradscope.report.write import destination

    if path is None:
        return None, ""
    fmt = path.rpartition(".")[2].lower()
    if fmt not in PLOT_FORMATS:
        raise GradscopeError(f"--plot {path}: give a .png, .svg or .pdf file")
    return destination(path, "--plot"), fmt


FIRST_NONFINITE = (
    "first-nonfinite"  # gradscope.inspector.script_stop.FIRST_NONFINITE (no torch here)
)


def parse_step(text: str | None) -> int | str | None:
    """--step: a step number >= 1 or first-nonfinite; anything else is one line, exit 2."""
    if text is None:
        return None
    if text.strip().lower() == FIRST_NONFINITE:
        return FIRST_NONFINITE
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise GradscopeError(
            f"--step {text}: give an optimizer step number >= 1 (1 is the first "
            f"optimizer.step(), as `gradscope watch` numbers them) or {FIRST_NONFINITE}"
        )
    return number


def _run_inspect(target: str, settings, explain: bool, argv, step=None, prepared=None):
    """`argv` not None: TARGET is a script to run with those arguments; `prepared`: the
    model and batch built for a model class (model_file)."""
    from rich.console import Console

    from gradscope.api import inspect, inspect_script, inspect_target
    from gradscope.report.text import styled

    what = target if step is None else f"step {step} of {target}"
    if step == FIRST_NONFINITE:
        what = f"{target}: a first run to find its first non-finite step"
    with Console(stderr=True).status(styled(f"inspecting {what} ..."), spinner="dots") as spinner:

        def found(at: int, by: str) -> None:
            """Between the two runs of first-nonfinite: what the first found, what is next."""
            verb = "is" if by == "loss" else "are"
            clikit.note(
                f"step {at} is the first whose {by} {verb} non-finite; running {target} "
                f"again to stop at its backward"
            )
            spinner.update(styled(f"inspecting step {at} of {target} (second run) ..."))

        if prepared is not None:
            t = prepared.target
            return inspect(
                t.model, t.batch, t.loss_fn, settings=settings, explain=explain, label=t.label
            )
        if argv is not None:
            return inspect_script(target, argv, settings, step=step, explain=explain, found=found)
        return inspect_target(target, settings, explain=explain)
