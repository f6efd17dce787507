"""`gradscope diff`: parse options, call gradscope.diff, render, exit. No torch at import time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

import typer

from gradscope.cli import common as clikit
from gradscope.errors import ExitCode, GradscopeError

AUTOCAST = {"bf16": "bfloat16", "bfloat16": "bfloat16", "fp16": "float16", "float16": "float16"}


def diff(
    ref: Annotated[
        str,
        typer.Argument(
            metavar="REF",
            help="The reference: path/file.py[:NAME], package.module[:NAME] or a built-in "
            "example. Its batch and loss_fn are used for both models.",
        ),
    ],
    new: Annotated[
        str | None,
        typer.Argument(
            metavar="NEW",
            show_default=False,
            help="The model to compare (a port), as REF. Omitted with --b-autocast, "
            "--b-compile or --b-deterministic: REF against itself.",
        ),
    ] = None,
    name_map: Annotated[
        str | None,
        typer.Option(
            "--name-map",
            metavar="FILE",
            help='TOML or JSON of "ref_name" = "new_name" pairs for renamed parameters and '
            'modules; a key ending in "." renames a prefix.',
        ),
    ] = None,
    rtol: Annotated[
        float | None,
        typer.Option(
            "--rtol",
            metavar="X",
            min=0.0,
            show_default="per dtype: 1e-5 float32, 2e-3 float16, 1.6e-2 bfloat16; 10x for grads",
            help="Relative tolerance: max|ref-new| <= atol + rtol * max|ref|.",
        ),
    ] = None,
    atol: Annotated[
        float | None,
        typer.Option(
            "--atol", metavar="X", min=0.0, show_default="per dtype", help="Absolute tolerance."
        ),
    ] = None,
    exact: Annotated[
        bool,
        typer.Option(
            "--exact", help="No tolerance: every value equal, NaN in the same places (+0 = -0)."
        ),
    ] = False,
    seed: Annotated[
        int,
        typer.Option("--seed", metavar="N", min=0, help="Random seed set before each pass."),
    ] = 0,
    allow_transposed: Annotated[
        bool,
        typer.Option(
            "--allow-transposed",
            help="Copy a 2-D weight whose shape is reversed (Conv1D vs Linear) transposed.",
        ),
    ] = False,
    noise_check: Annotated[
        bool,
        typer.Option(
            "--noise-check/--no-noise-check",
            help="When they differ, run each model again with another seed to find "
            "randomness (dropout left on).",
        ),
    ] = True,
    b_autocast: Annotated[
        str | None,
        typer.Option(
            "--b-autocast",
            metavar="DTYPE",
            help="Run NEW (or REF again, without NEW) under torch.autocast: bf16 or fp16.",
        ),
    ] = None,
    b_compile: Annotated[
        bool,
        typer.Option(
            "--b-compile",
            help="Run NEW (or REF again, without NEW) through torch.compile. The recording "
            "hooks break the graph at module boundaries: each module's compiled code is "
            "compared, not fusions across modules.",
        ),
    ] = False,
    b_deterministic: Annotated[
        bool,
        typer.Option(
            "--b-deterministic",
            help="Run NEW (or REF again, without NEW) under "
            "torch.use_deterministic_algorithms(True), forward and backward.",
        ),
    ] = False,
    format: clikit.FormatOpt = None,
    output: clikit.OutputOpt = None,
    fail_on: clikit.FailOnOpt = None,
    config: clikit.ConfigOpt = None,
    top: Annotated[
        int,
        typer.Option("--top", metavar="N", min=1, help="Module rows to show in the terminal."),
    ] = 24,
    all_rows: Annotated[bool, typer.Option("--all", help="Show every module call.")] = False,
    plot: Annotated[
        str | None,
        typer.Option(
            "--plot",
            metavar="FILE",
            help="Also draw the per-module difference along the forward, the first "
            "divergence marked, to FILE.png, .svg or .pdf.",
        ),
    ] = None,
    dtype: Annotated[
        str | None,
        typer.Option(
            "--dtype",
            metavar="DTYPE",
            help="Two runs: the dtype they trained in, for the tolerance, when their logs "
            "do not record it (default float32): float64, float32, float16, bfloat16.",
        ),
    ] = None,
    width: clikit.WidthOpt = None,
    debug: clikit.DebugOpt = False,
) -> None:
    """Run two models on the same batch with the same weights and say where they first differ.

    The reference's weights are copied into NEW wherever names and shapes pair up
    (wrapper prefixes such as module., _orig_mod., model. are stripped; --name-map
    pairs the rest), both run seeded alike in the mode their targets give, and
    every module's inputs and outputs are compared. The difference starts at the
    first module whose output differs while its inputs agree; the report gives its
    size, where that module's forward is written, and the first differing gradient.
    Both models are left exactly as they were.

    Exit codes: 0 identical within tolerance, 1 they differ (a finding at --fail-on,
    default error), 2 could not run (a target that cannot load, no parameter pairs
    up, a bad option), 3 a bug in gradscope.

    Examples:

    \b
      gradscope diff reference.py:build port.py:build
      gradscope diff hf_model.py my_port.py --name-map names.toml
      gradscope diff ref.py new.py --exact -f json -o diff.json
      gradscope diff ref.py new.py --plot diff.png
      gradscope diff model.py --b-autocast bf16
      gradscope diff model.py --b-compile
      gradscope diff model.py --b-deterministic
      gradscope diff run_a.jsonl run_b.jsonl --plot runs.png

    Two runs: REF and NEW both `gradscope watch --log` files (.jsonl or .jsonl.gz).
    Steps pair by number, parameters by name as above; the first step where the loss,
    the total gradient norm or a parameter's gradient norm differs beyond the tolerance
    (per dtype, or --exact) is where the runs part; each run is also judged by itself:
    did it train at all.

    See docs/diff.md for a worked example and the JSON schema.
    """
    code = ExitCode.ERROR
    with clikit.guarded(debug):
        from gradscope import config as config_mod
        from gradscope.cli.inspect_cmd import plot_destination
        from gradscope.diff.align import load_name_map
        from gradscope.diff.engine import DiffOptions
        from gradscope.outcome import exit_code
        from gradscope.report import outputs
        from gradscope.report.write import distinct, write_file

        where = outputs.plan(format, output)
        plot_path, plot_format = plot_destination(plot)
        distinct({**where.paths(), "--plot": plot_path}, {"REF": ref, "NEW": new})
        settings = config_mod.load(config, flags={"fail-on": fail_on})
        if new is not None and (_is_log(ref) or _is_log(new)):
            runs = _RunsArgs(rtol, atol, exact, dtype, name_map, plot_path, plot_format)
            raise typer.Exit(_diff_runs(ref, new, runs, settings, where, width))
        if new is None and b_autocast is None and not b_compile and not b_deterministic:
            raise GradscopeError(
                "give NEW, or --b-autocast/--b-compile/--b-deterministic to compare REF with itself"
            )
        autocast = None
        if b_autocast is not None:
            autocast = AUTOCAST.get(b_autocast.lower())
            if autocast is None:
                raise GradscopeError(f"--b-autocast {b_autocast}: use bf16 or fp16")
        options = DiffOptions(
            rtol=rtol,
            atol=atol,
            exact=exact,
            seed=seed,
            names=load_name_map(name_map) if name_map else DiffOptions().names,
            allow_transposed=allow_transposed,
            noise_check=noise_check,
            autocast=autocast,
            compile=b_compile,
            deterministic=b_deterministic,
        )
        with clikit.user_stdout_to_stderr(where.to_stdout):
            result = _run(ref, new, options)
        if plot_path:
            from gradscope.report.diff_plot import plot as diff_plot

            write_file(plot_path, diff_plot(result, plot_format))
            clikit.note(f"wrote {plot}")
        result.findings = settings.judged(result.findings)
        outcome = result.outcome()
        outputs.deliver(where, outcome, settings.fail_on, width, top=None if all_rows else top)
        code = exit_code([outcome], settings.fail_on)
    raise typer.Exit(code)


def _is_log(path: str) -> bool:
    from gradscope.diff.runs import is_log

    return is_log(path)


@dataclass(frozen=True)
class _RunsArgs:
    rtol: float | None
    atol: float | None
    exact: bool
    dtype: str | None
    name_map: str | None
    plot_path: str | None
    plot_format: str


def _diff_runs(
    ref: str,
    new: str,
    a: _RunsArgs,
    settings: Any,
    where: Any,
    width: int | None,
) -> ExitCode:
    """Two `watch --log` files: read, compare, judge under the settings, write, exit code."""
    from gradscope.diff.align import load_name_map
    from gradscope.diff.runs import RunsOptions, diff_logs
    from gradscope.diff.runs.tolerance import RTOL
    from gradscope.outcome import exit_code
    from gradscope.report import outputs
    from gradscope.report.write import write_file

    for path in (ref, new):
        if not _is_log(path):
            raise GradscopeError(
                f"{path}: to diff two runs give two `gradscope watch --log` files "
                "(.jsonl or .jsonl.gz)"
            )
    dtype = a.dtype.lower().removeprefix("torch.") if a.dtype else None
    if dtype is not None and dtype not in RTOL:
        raise GradscopeError(f"--dtype {a.dtype}: use one of {', '.join(RTOL)}")
    options = RunsOptions(
        rtol=a.rtol,
        atol=a.atol,
        exact=a.exact,
        dtype=dtype,
        names=load_name_map(a.name_map) if a.name_map else RunsOptions().names,
    )
    result = diff_logs(ref, new, options)
    if result.could_not_run:
        clikit.error(f"{result.label}: {result.could_not_run}")
    elif a.plot_path:
        from gradscope.report.diff_runs_plot import plot as runs_plot

        write_file(a.plot_path, runs_plot(result, a.plot_format))
        clikit.note(f"wrote {a.plot_path}")
    result.findings = settings.judged(result.findings)
    outcome = result.outcome()
    outputs.deliver(where, outcome, settings.fail_on, width)
    return exit_code([outcome], settings.fail_on)


def _run(ref: str, new: str | None, options: Any) -> Any:
    from rich.console import Console

    from gradscope.diff import diff_targets
    from gradscope.report.text import styled

    with Console(stderr=True).status(styled(f"comparing {ref} ..."), spinner="dots"):
        return diff_targets(ref, new, options)
