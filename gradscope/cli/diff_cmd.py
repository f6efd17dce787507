"""`gradscope diff`: parse options, call gradscope.diff, render, exit. No torch at import time."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer
from rich.console import Console

from gradscope import api
from gradscope import config as config_mod
from gradscope.api.pictures import Plot
from gradscope.cli import common as clikit
from gradscope.diff.align import EMPTY_MAP, load_name_map
from gradscope.diff.options import DiffOptions
from gradscope.diff.runs.result import RunsDiff
from gradscope.outcome import exit_code
from gradscope.report import outputs
from gradscope.report.text import styled
from gradscope.report.write import distinct

RefOpt = Annotated[
    str,
    typer.Argument(
        metavar="REF",
        help="The reference: path/file.py[:NAME], package.module[:NAME] or a built-in "
        "example. Its batch and loss_fn are used for both models.",
    ),
]

NewOpt = Annotated[
    str | None,
    typer.Argument(
        metavar="NEW",
        show_default=False,
        help="The model to compare (a port), as REF. Omitted with --b-autocast, "
        "--b-compile or --b-deterministic: REF against itself.",
    ),
]

NameMapOpt = Annotated[
    str | None,
    typer.Option(
        "--name-map",
        metavar="FILE",
        help='TOML or JSON of "ref_name" = "new_name" pairs for renamed parameters and '
        'modules; a key ending in "." renames a prefix.',
    ),
]

RtolOpt = Annotated[
    float | None,
    typer.Option(
        "--rtol",
        metavar="X",
        min=0.0,
        show_default="per dtype: 1e-5 float32, 2e-3 float16, 1.6e-2 bfloat16; 10x for grads",
        help="Relative tolerance: max|ref-new| <= atol + rtol * max|ref|.",
    ),
]

AtolOpt = Annotated[
    float | None,
    typer.Option(
        "--atol", metavar="X", min=0.0, show_default="per dtype", help="Absolute tolerance."
    ),
]

ExactOpt = Annotated[
    bool,
    typer.Option(
        "--exact", help="No tolerance: every value equal, NaN in the same places (+0 = -0)."
    ),
]

SeedOpt = Annotated[
    int,
    typer.Option("--seed", metavar="N", min=0, help="Random seed set before each pass."),
]

AllowTransposedOpt = Annotated[
    bool,
    typer.Option(
        "--allow-transposed",
        help="Copy a 2-D weight whose shape is reversed (Conv1D vs Linear) transposed.",
    ),
]

NoiseCheckOpt = Annotated[
    bool,
    typer.Option(
        "--noise-check/--no-noise-check",
        help="When they differ, run each model again with another seed to find "
        "randomness (dropout left on).",
    ),
]

BAutocastOpt = Annotated[
    str | None,
    typer.Option(
        "--b-autocast",
        metavar="DTYPE",
        help="Run NEW (or REF again, without NEW) under torch.autocast: bf16 or fp16.",
    ),
]

BCompileOpt = Annotated[
    bool,
    typer.Option(
        "--b-compile",
        help="Run NEW (or REF again, without NEW) through torch.compile. The recording "
        "hooks break the graph at module boundaries: each module's compiled code is "
        "compared, not fusions across modules.",
    ),
]

BDeterministicOpt = Annotated[
    bool,
    typer.Option(
        "--b-deterministic",
        help="Run NEW (or REF again, without NEW) under "
        "torch.use_deterministic_algorithms(True), forward and backward.",
    ),
]

TopOpt = Annotated[
    int,
    typer.Option("--top", metavar="N", min=1, help="Module rows to show in the terminal."),
]

AllRowsOpt = Annotated[bool, typer.Option("--all", help="Show every module call.")]

PlotOpt = Annotated[
    str | None,
    typer.Option(
        "--plot",
        metavar="FILE",
        help="Also draw the per-module difference along the forward, the first "
        "divergence marked, to FILE.png, .svg or .pdf.",
    ),
]

DtypeOpt = Annotated[
    str | None,
    typer.Option(
        "--dtype",
        metavar="DTYPE",
        help="Two runs: the dtype they trained in, for the tolerance, when their logs "
        "do not record it (default float32): float64, float32, float16, bfloat16.",
    ),
]

# the --help text (as a docstring it would make the function too long to read)
HELP = """Run two models on the same batch with the same weights and say where they first differ.

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


def diff(
    ref: RefOpt,
    new: NewOpt = None,
    name_map: NameMapOpt = None,
    rtol: RtolOpt = None,
    atol: AtolOpt = None,
    exact: ExactOpt = False,
    seed: SeedOpt = 0,
    allow_transposed: AllowTransposedOpt = False,
    noise_check: NoiseCheckOpt = True,
    autocast: BAutocastOpt = None,
    compile: BCompileOpt = False,
    deterministic: BDeterministicOpt = False,
    format: clikit.FormatOpt = None,
    output: clikit.OutputOpt = None,
    fail_on: clikit.FailOnOpt = None,
    config: clikit.ConfigOpt = None,
    top: TopOpt = 24,
    all_rows: AllRowsOpt = False,
    plot: PlotOpt = None,
    dtype: DtypeOpt = None,
    width: clikit.WidthOpt = None,
    debug: clikit.DebugOpt = False,
) -> None:
    """Two models on one batch, or two runs, compared (HELP is the --help)."""
    params = dict(locals())
    with clikit.guarded(debug):
        where = outputs.plan(format, output)
        picture = Plot.of(plot)
        distinct(
            {**where.paths(), "--plot": picture.path if picture else None}, {"REF": ref, "NEW": new}
        )
        settings = config_mod.load(config, flags={"fail-on": fail_on})
        names = load_name_map(name_map) if name_map else EMPTY_MAP
        options = clikit.options_from(DiffOptions, params, names=names)
        with clikit.user_stdout_to_stderr(where.to_stdout), _spinner(ref, new):
            result = api.diff(ref, new, options, settings)
        if isinstance(result, RunsDiff) and result.could_not_run:
            clikit.error(f"{result.label}: {result.could_not_run}")
        elif plot:
            clikit.note(f"wrote {plot}")
        outcome = result.outcome()
        rows = 30 if isinstance(result, RunsDiff) else None if all_rows else top
        outputs.deliver(where, outcome, settings.fail_on, width, top=rows)
        raise typer.Exit(exit_code([outcome], settings.fail_on))


@contextmanager
def _spinner(ref: str, new: str | None) -> Iterator[None]:
    """A spinner on stderr while two models run (two logs are read without one)."""
    if new is not None and (api.diffing.is_log(ref) or api.diffing.is_log(new)):
        yield
        return
    with Console(stderr=True).status(styled(f"comparing {ref} ..."), spinner="dots"):
        yield
