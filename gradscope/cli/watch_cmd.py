"""`gradscope watch SCRIPT -- ARGS`: run a training script, judge every optimizer step.

No torch or matplotlib at import: `gradscope --help` imports this.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from gradscope import api
from gradscope import config as config_mod
from gradscope.api.pictures import WatchPictures
from gradscope.cli import common as clikit
from gradscope.distributed.launch import record_exit, relaunch
from gradscope.errors import ConfigError, ExitCode
from gradscope.findings import Severity
from gradscope.fmt import printable
from gradscope.outcome import Outcome, exit_code
from gradscope.report import outputs
from gradscope.report.outputs import Format, Plan
from gradscope.report.write import NotWritten, destination, distinct, folder_destination
from gradscope.suggest import did_you_mean
from gradscope.thresholds import Thresholds, threshold_value
from gradscope.watcher.distributed_hooks import (
    is_main_process,
    launched_rank,
    launched_world,
    quiet_unless_main,
    rank_exit_code,
)
from gradscope.watcher.status import status_line

if TYPE_CHECKING:
    from gradscope.watcher.report import WatchReport


def _thresholds(pairs: list[str] | None) -> dict[str, float]:
    out = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or key not in Thresholds.keys():
            close = did_you_mean(key, Thresholds.keys()) if sep else ""
            raise ConfigError(
                f"--threshold {pair!r}: expected KEY=X, KEY one of "
                + ", ".join(Thresholds.keys())
                + close
            )
        try:
            number = float(value)
        except ValueError:
            raise ConfigError(f"--threshold {pair!r}: {value!r} is not a number") from None
        try:
            out[key] = threshold_value(number, key)
        except ValueError as exc:
            raise ConfigError(f"--threshold {pair}: {exc}") from None
    return out


ScriptOpt = Annotated[
    str,
    typer.Argument(metavar="SCRIPT", help="The training script (its arguments go after --)."),
]

StepsOpt = Annotated[
    int | None,
    typer.Option("--steps", metavar="N", min=1, help="Stop cleanly after N optimizer steps."),
]

LogOpt = Annotated[
    str | None,
    typer.Option(
        "--log",
        metavar="FILE",
        help="Stream one JSON line per step to FILE (written at each read-back; "
        "uncompressed, whatever the name: gzip it afterwards for a .jsonl.gz).",
    ),
]

PlotOpt = Annotated[
    str | None,
    typer.Option(
        "--plot",
        metavar="FILE",
        help="Draw a .png, .svg or .pdf: layers × steps heatmap over loss and norm curves.",
    ),
]

TensorboardOpt = Annotated[
    str | None,
    typer.Option(
        "--tensorboard",
        metavar="DIR",
        help="Also write the run as TensorBoard events to DIR as it goes: per-step loss, "
        "norms, lr... as scalars, a layers × steps heatmap, findings as text "
        "(needs tensorboard).",
    ),
]

WandbOpt = Annotated[
    str | None,
    typer.Option(
        "--wandb",
        metavar="PROJECT",
        help="Also log the run to wandb as it goes, in PROJECT (or the script's own run): "
        "about ten series per optimizer, one heatmap, findings as alerts (needs wandb).",
    ),
]

MlflowOpt = Annotated[
    str | None,
    typer.Option(
        "--mlflow",
        metavar="URI",
        help="Also log the run to the MLflow tracking URI as it goes (or the script's "
        "active run): batched series, findings as tags and findings.json (needs mlflow).",
    ),
]

FormatOpt = Annotated[
    Format | None,
    typer.Option(
        "--format",
        "-f",
        show_default="terminal, or the -o file's extension",
        help="terminal, json (per-step series), junit or markdown.",
    ),
]

ThresholdOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--threshold",
        "-t",
        metavar="KEY=X",
        help="Override a threshold (e.g. spike-sigma=8); repeatable.",
    ),
]

UpdateEveryOpt = Annotated[
    int,
    typer.Option(
        "--update-every",
        metavar="N",
        min=1,
        help="Measure update/weight ratios at each of the first 100 steps, then "
        "every N steps (derived from Adam/SGD state beyond 16 MiB of parameters: no copy of a "
        "large model).",
    ),
]

FlushEveryOpt = Annotated[
    int,
    typer.Option(
        "--flush-every",
        metavar="N",
        min=1,
        help="Read statistics back from the device every N steps (at most 20 times a second).",
    ),
]

BatchSizeOpt = Annotated[
    int | None,
    typer.Option(
        "--batch-size",
        metavar="N",
        min=1,
        help="Samples in one micro-batch (per rank), for the critical batch size; "
        "default: the leading dimension of the model's first input.",
    ),
]

AgainstOpt = Annotated[
    str | None,
    typer.Option(
        "--against",
        metavar="REF.jsonl",
        help="Compare every step with a reference run's --log (.jsonl or .jsonl.gz): the "
        "first divergence "
        "on stderr as it happens; its findings (GS607-GS609) join the report "
        "and count against --fail-on (docs/diff.md, Two runs).",
    ),
]

NprocPerNodeOpt = Annotated[
    int | None,
    typer.Option(
        "--nproc-per-node",
        metavar="N",
        min=1,
        help="Launch SCRIPT on N local ranks under torchrun (DDP/FSDP2); rank 0 reports.",
    ),
]

HangTimeoutOpt = Annotated[
    float | None,
    typer.Option(
        "--hang-timeout",
        metavar="SECONDS",
        min=0,
        help="Under torchrun: when no rank made progress for SECONDS, name where each "
        "waits and exit 2 (default: $GRADSCOPE_DIST_TIMEOUT or 300; 0: off).",
    ),
]

# the --help text (as a docstring it would make the function too long to read)
HELP = """Run SCRIPT as `python SCRIPT ARGS` and judge every optimizer step over time.

Records loss, gradient norms before clipping (unscaled under GradScaler), per-layer
norms, learning rates, accumulation and AMP skips; reports spikes, trends,
clipping, AMP health, update/weight ratios, missing zero_grad and parameters
never updated. A crash or Ctrl-C still reports the steps recorded.

Examples:

  gradscope watch train.py -- --epochs 3 --lr 3e-4

  gradscope watch train.py --steps 200 --plot grads.png --log steps.jsonl

  gradscope watch train.py --tensorboard runs/gradscope

  gradscope watch train.py --wandb my-project --mlflow sqlite:///mlflow.db

  gradscope watch train.py --format json --output report.json

  gradscope watch train_ddp.py --nproc-per-node 2 -- --epochs 1

"""


def watch(
    ctx: typer.Context,
    script: ScriptOpt,
    steps: StepsOpt = None,
    log: LogOpt = None,
    plot: PlotOpt = None,
    tensorboard: TensorboardOpt = None,
    wandb: WandbOpt = None,
    mlflow: MlflowOpt = None,
    format: FormatOpt = None,
    output: clikit.OutputOpt = None,
    fail_on: clikit.FailOnOpt = None,
    config: clikit.ConfigOpt = None,
    threshold: ThresholdOpt = None,
    update_every: UpdateEveryOpt = 25,
    flush_every: FlushEveryOpt = 10,
    batch_size: BatchSizeOpt = None,
    width: clikit.WidthOpt = None,
    against: AgainstOpt = None,
    nproc_per_node: NprocPerNodeOpt = None,
    hang_timeout: HangTimeoutOpt = None,
    debug: clikit.DebugOpt = False,
) -> None:
    """SCRIPT run and every optimizer step judged (HELP is the --help)."""
    params = dict(locals())
    if nproc_per_node is not None:
        raise typer.Exit(relaunch(nproc_per_node, sys.argv[1:]))
    with clikit.guarded(debug):
        settings = config_mod.load(config, flags={"fail-on": fail_on, **_thresholds(threshold)})
        where, log = _destinations(script, format, output, plot, log, tensorboard)
        main_rank = is_main_process()
        options = clikit.options_from(
            api.WatchOptions,
            params,
            argv=tuple(ctx.args),
            log=log,
            nproc_per_node=None,  # relaunched above, under torchrun
            quiet_stdout=where.to_stdout or not main_rank,
        )
        with quiet_unless_main(), status_line(where.machine_on_stdout, enabled=main_rank):
            report = api.watch_script(script, options=options, settings=settings)
        outcome = report.outcome()
        if main_rank:
            outcome.unwritten[:0] = _deliver(report, outcome, where, settings.fail_on, width)
            if plot and not report.judged:
                clikit.note(f"--plot {plot}: not drawn, no step was recorded")
        _status_line(report, main_rank, debug)
        raise typer.Exit(_exit_code(outcome, settings.fail_on, main_rank))


def _destinations(
    script: str,
    format: Format | None,
    output: list[str] | None,
    plot: str | None,
    log: str | None,
    tensorboard: str | None,
) -> tuple[Plan, str | None]:
    """The report's destinations and the --log's path, resolved before the script runs (a
    script that changes directory moves nothing), none of them the script or each other."""
    where = outputs.plan(format, output)
    log = destination(log, "--log")
    folders = {"--tensorboard": tensorboard and folder_destination(tensorboard, "--tensorboard")}
    paths = {**where.paths(), **WatchPictures.of(plot).paths(), **folders, "--log": log}
    distinct(paths, {"SCRIPT": script})
    return where, log


def _deliver(
    report: WatchReport, outcome: Outcome, where: Plan, fail_on: Severity | None, width: int | None
) -> list[str]:
    """A run with nothing judged gets no empty terminal report on stdout, but every file
    named by -o and every CI format still gets its document (marked partial when the
    script failed or was interrupted). Returns the lines of the outputs that could not be
    written: said with the other unwritten files, after the lines on how the run ended."""
    shown = report.judged or bool(report.findings)
    kept = where if shown else where.without_terminal_on_stdout()
    if not kept.destinations:
        return []
    try:
        outputs.deliver(kept, outcome, fail_on, width)
    except NotWritten as exc:
        return exc.lines
    return []


def _exit_code(outcome: Outcome, fail_on: Severity | None, main_rank: bool) -> int:
    """The run's exit code (a file asked for and not written, said here: 2). Under
    torchrun a failing rank makes torchrun stop rank 0 before its report. Findings under
    --nproc-per-node: every rank ran to its end and the launcher exits with the code rank 0
    left, so rank 0 exits 0 and torchrun prints no ChildFailedError report over the run's
    own (a failure keeps its code: torchrun must stop the ranks still waiting in a
    collective)."""
    for line in outcome.unwritten:
        clikit.error(line)
    code = exit_code([outcome], fail_on)
    recorded = record_exit(code) if main_rank else False
    final = rank_exit_code(code)
    return 0 if recorded and code == ExitCode.FINDINGS else final


def _status_line(report: WatchReport, main_rank: bool = True, debug: bool = False) -> None:
    """What ended the run, on stderr. A crash after steps were judged: the script's own
    traceback (as `python SCRIPT` prints it) above the line naming file:line and the
    error; a failure before the first step is one line (the traceback under --debug).
    A failure of gradscope's own is its internal-error note (its traceback under --debug)."""
    run = report.run
    rank = f"rank {launched_rank()}: " if launched_world() > 1 else ""
    steps = len(run.steps)
    for fault in report.faults:  # gradscope's own failure: its frames shown under --debug
        if debug:
            sys.stderr.write(printable(fault.trace))
        clikit.error(f"{rank}{fault.note()}")
    if run.status == "crashed":
        if run.traceback and (report.judged or debug):
            sys.stderr.write(printable(run.traceback))
        if report.judged:
            covers = "the report covers them" if main_rank else "rank 0 reports them"
            done = f"{steps} optimizer step{'' if steps == 1 else 's'}"
            clikit.error(f"{rank}{report.failure()} (after {done}; {covers})")
        else:
            hint = run.traceback and not debug
            clikit.error(
                f"{rank}{report.failure()} (before any optimizer step"
                + ("; rerun with --debug for the traceback)" if hint else ")")
            )
    elif run.status in ("interrupted", "terminated"):
        how = "interrupted" if run.status == "interrupted" else "terminated (SIGTERM)"
        clikit.error(f"{rank}{how} after {steps} optimizer step{'' if steps == 1 else 's'}")
    elif not report.judged and main_rank:
        clikit.error(f"{rank}{report.nothing_judged()}")
