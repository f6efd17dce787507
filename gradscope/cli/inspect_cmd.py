"""`gradscope inspect`: one instrumented forward and backward of a target, or of one step of a
training script; parse options, call gradscope.api, render, exit. No torch at import time."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console

from gradscope import api
from gradscope import config as config_mod
from gradscope.api.inspecting import inspect_resolved
from gradscope.api.options import FIRST_NONFINITE
from gradscope.api.pictures import Plot
from gradscope.cli import common as clikit
from gradscope.errors import GradscopeError
from gradscope.examples import EXAMPLES
from gradscope.outcome import exit_code
from gradscope.report import outputs
from gradscope.report.text import styled
from gradscope.report.write import distinct
from gradscope.suggest import did_you_mean

# distributed.context (which loads torch) is imported in functions: `gradscope --help`
# must not load it

EXAMPLE_LIST = "\n".join(f"  {e.name:18} {e.summary}" for e in EXAMPLES.values())
#: how cli.root registers the command: the examples in the epilog, script arguments after --
SETTINGS: dict[str, Any] = dict(
    epilog="Built-in examples (run by name; `gradscope examples` lists them):\n\n\b\n"
    + EXAMPLE_LIST,
    context_settings={"allow_extra_args": True},
)


def _threshold(flag: str, text: str):
    return typer.Option(flag, metavar="X", help=text, rich_help_panel="Thresholds")


TargetOpt = Annotated[
    str,
    typer.Argument(
        metavar="TARGET",
        help="path/file.py[:NAME], package.module[:NAME] or a built-in example name. NAME "
        "(default gradscope_target) returns (model, batch[, loss_fn]) or a dict.",
    ),
]

TopOpt = Annotated[
    int,
    typer.Option(
        "--top", metavar="N", min=1, help="Parameter rows to show in the terminal report."
    ),
]

AllRowsOpt = Annotated[bool, typer.Option("--all", help="Show every parameter row.")]

ScriptOpt = Annotated[
    bool,
    typer.Option(
        "--script",
        help="TARGET is a training script: run it (arguments after --) until its "
        "first backward() (or that of --step N) and inspect that step instead of running it.",
    ),
]

StepOpt = Annotated[
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
]

ExplainOpt = Annotated[
    bool,
    typer.Option(
        "--explain/--no-explain",
        help="Replay the forward to locate what the cheap pass found (which op, which "
        "line); for a --script step, watch its forward as it runs instead.",
    ),
]

ExplodeNormOpt = Annotated[
    float | None,
    _threshold(
        "--explode-norm",
        "GS104: total gradient L2 norm over the model above X is exploding "
        "(scale-invariant weights feeding a norm layer left out; one tensor is "
        "judged by its RMS per element, explode-rms).",
    ),
]

ExplodeMedianRatioOpt = Annotated[
    float | None,
    _threshold(
        "--explode-median-ratio",
        "GS104: gradient RMS X times the model median (lookup tables vs lookup "
        "tables), for a tensor that runs before most of the model.",
    ),
]

VanishNormOpt = Annotated[
    float | None,
    _threshold("--vanish-norm", "GS105: gradient L2 norm below X is vanishing."),
]

VanishDepthRatioOpt = Annotated[
    float | None,
    _threshold("--vanish-depth-ratio", "GS105: first/last layer gradient RMS below X."),
]

PlotOpt = Annotated[
    str | None,
    typer.Option(
        "--plot",
        metavar="FILE",
        help="Also draw the gradient flow (per-parameter grad norm and grad/weight, log "
        "scale, coloured by status) to FILE.png, .svg or .pdf.",
    ),
]

THRESHOLD_FLAGS = ("explode_norm", "explode_median_ratio", "vanish_norm", "vanish_depth_ratio")
"""The parameters that set settings, not options: thresholds, by their keys."""

# the --help text (as a docstring it would make the function too long to read)
HELP = """Run one forward and backward pass of TARGET and report its gradients.

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


def inspect(
    ctx: typer.Context,
    target: TargetOpt,
    format: clikit.FormatOpt = None,
    output: clikit.OutputOpt = None,
    fail_on: clikit.FailOnOpt = None,
    config: clikit.ConfigOpt = None,
    top: TopOpt = 30,
    all_rows: AllRowsOpt = False,
    script: ScriptOpt = False,
    step: StepOpt = None,
    explain: ExplainOpt = True,
    explode_norm: ExplodeNormOpt = None,
    explode_median_ratio: ExplodeMedianRatioOpt = None,
    vanish_norm: VanishNormOpt = None,
    vanish_depth_ratio: VanishDepthRatioOpt = None,
    plot: PlotOpt = None,
    width: clikit.WidthOpt = None,
    debug: clikit.DebugOpt = False,
) -> None:
    """One instrumented forward and backward of TARGET, reported (HELP is the --help)."""
    params = dict(locals())
    with clikit.guarded(debug):
        given = (explode_norm, explode_median_ratio, vanish_norm, vanish_depth_ratio)
        settings = _settings(config, fail_on, given)
        where = outputs.plan(format, output)
        options = clikit.options_from(
            api.InspectOptions, params, argv=tuple(ctx.args), step=parse_step(step)
        )
        target_file = target.rpartition(":")[0] if ":" in target else target
        picture = Plot.of(plot)  # checked before anything runs
        distinct(
            {**where.paths(), "--plot": picture.path if picture else None}, {"TARGET": target_file}
        )
        with clikit.user_stdout_to_stderr(where.to_stdout):
            run = api.resolve(target, options)
        if run.note:
            clikit.note(run.note)
        with clikit.user_stdout_to_stderr(where.to_stdout):
            report = _run_inspect(run, options, settings)
        outcome = report.outcome()
        code = exit_code([outcome], settings.fail_on)
        if run.script and _launched_rank() != 0:  # torchrun: rank 0 alone reports
            raise typer.Exit(code)
        if plot:
            clikit.note(f"wrote {plot}")
        rows = None if all_rows else top
        outputs.deliver(where, outcome, settings.fail_on, width, top=rows)
        raise typer.Exit(code)


def _settings(
    config: str | None, fail_on: str | None, given: tuple[float | None, ...]
) -> config_mod.Settings:
    """The settings with the threshold flags (THRESHOLD_FLAGS' order) and --fail-on over them."""
    pairs = zip(THRESHOLD_FLAGS, given, strict=True)
    thresholds = {flag.replace("_", "-"): x for flag, x in pairs}
    return config_mod.load(config, flags={"fail-on": fail_on, **thresholds})


def _launched_rank() -> int:
    from gradscope.distributed.context import env_rank

    return env_rank() or 0


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
            + did_you_mean(text.strip(), [FIRST_NONFINITE])
        )
    return number


def _run_inspect(
    run: api.Resolved, options: api.InspectOptions, settings: config_mod.Settings
) -> Any:
    """One call of the API under a spinner that names what runs (first-nonfinite: the
    step the first run found, between the two runs)."""
    target, step = run.spec, options.step
    what = target if step is None else f"step {step} of {target}"
    if step == FIRST_NONFINITE:
        what = f"{target}: a first run to find its first non-finite step"
    with Console(stderr=True).status(styled(f"inspecting {what} ..."), spinner="dots") as spinner:

        def found(at: int, by: str) -> None:
            verb = "is" if by == "loss" else "are"
            clikit.note(
                f"step {at} is the first whose {by} {verb} non-finite; running {target} "
                f"again to stop at its backward"
            )
            spinner.update(styled(f"inspecting step {at} of {target} (second run) ..."))

        return inspect_resolved(run, options, settings, found)
