"""`gradscope gradcheck`: the command. Parse options, call gradscope.gradcheck, render, exit.

No torch at import time: `gradscope --help` imports this module.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from gradscope import api
from gradscope import config as config_mod
from gradscope.cli import common as clikit
from gradscope.gradcheck.input_options import parse_arg, parse_shape
from gradscope.gradcheck.values import parse_domain, parse_tensor
from gradscope.outcome import exit_code
from gradscope.report import outputs

SpecsOpt = Annotated[
    list[str] | None,
    typer.Argument(
        metavar="SPEC",
        show_default=False,
        help="package.module:Name or path/file.py:Name; Name is a torch.autograd.Function "
        "subclass, a function of tensors or an nn.Module (class or factory). Without "
        ":Name, every Function defined in the module. Default: the "
        "[[tool.gradscope.gradcheck]] entries of the config.",
    ),
]

ShapeOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--shape",
        metavar="NAME=DIMS",
        show_default=False,
        help="Shape of one generated tensor input, e.g. x=3,4 (repeatable; x= is a scalar). "
        "Default shape: 4,4.",
    ),
]

ArgOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--arg",
        metavar="NAME=VALUE",
        show_default=False,
        help="A non-tensor argument, VALUE a Python literal (never run as code): dim=1, "
        "mode=\"'mean'\", sizes=[2,3] (repeatable).",
    ),
]

TensorOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--tensor",
        metavar="NAME=LITERAL",
        show_default=False,
        help="A tensor input given by value: integers make an int64 tensor (targets, "
        "indices), True/False a bool mask, floats a differentiable input at exactly that "
        "point: target=[0,2,1], mask=[[True,False],[False,True]], x=[0.0,1.0] (repeatable).",
    ),
]

DomainOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--domain",
        metavar="[NAME=]DOMAIN",
        show_default=False,
        help="Where generated floats are drawn: real (default), positive, negative, "
        "nonzero, unit (0..1) or LOW,HIGH; for every generated input, or NAME= for one: "
        "--domain positive, --domain alpha=1.1,3 (repeatable). Values keep clear of the "
        "bounds so finite differences stay inside.",
    ),
]

DtypeOpt = Annotated[
    str | None,
    typer.Option(
        "--dtype",
        metavar="DTYPE",
        show_default=False,
        help="float64 (default; recommended), float32, float16 or bfloat16. Lower precisions "
        "loosen the tolerances and get a warning. complex128 or complex64: complex inputs, "
        "checked as (re, im) pairs.",
    ),
]

SeedOpt = Annotated[
    int | None,
    typer.Option(
        "--seed",
        metavar="N",
        min=0,
        max=2**63 - 1,
        show_default=False,
        help="Seed for generated inputs and sampled directions (default 0).",
    ),
]

SecondOrderOpt = Annotated[
    bool | None,
    typer.Option(
        "--second-order/--no-second-order",
        show_default=False,
        help="Also check the backward's own gradient (gradgradcheck).",
    ),
]

ForwardAdOpt = Annotated[
    bool | None,
    typer.Option(
        "--forward-ad/--no-forward-ad",
        show_default=False,
        help="Check forward-mode AD (jvp); default: when the Function defines jvp.",
    ),
]

# the --help text (as a docstring it would make the function too long to read)
HELP = """Check custom autograd Functions against numerical derivatives, and say which
gradient is wrong, where, and why.

A sampled check (exact Jacobian columns at chosen input elements plus random
directions, slow mode's per-entry tolerance) gives the verdict in a few dozen
calls; only the (input, output) pairs that fail are then measured entry by
entry and diagnosed: constant factor, sign flip, None or zero gradient,
wrong order, transposed, masked/branch error, ignored grad_output.

Each wrong gradient is a GS201 finding, a backward that raised GS202 (both
errors), a caveat GS203 (a warning); severities and ignores in the config apply
as to every command.

Exit codes: 0 all targets pass, 1 a finding at --fail-on (default error: a
gradient is wrong or the target's backward raised), 2 could not run (bad SPEC, import error, bad
--shape/--arg/--tensor/--domain/--dtype, or a forward that rejects the
generated inputs: state inputs that fit).

Examples:

\b
  gradscope gradcheck gradscope.examples.functions:CustomReLU
  gradscope gradcheck gradscope.examples.functions:SquareMissingFactor -f json
  gradscope gradcheck ops/my_fn.py:MyFn --shape x=64,32 --arg dim=1 --second-order
  gradscope gradcheck torch.nn.functional:gelu torch.nn.functional:softplus
  gradscope gradcheck torch.nn.functional:nll_loss --shape input=3,3 --tensor target=[0,2,1]
  gradscope gradcheck torch:sqrt --domain positive
  gradscope gradcheck entmax.root_finding:EntmaxBisectFunction --arg alpha=1.3

See docs/gradcheck.md for the input convention, the diagnoses and the JSON schema.

"""


def gradcheck(
    specs: SpecsOpt = None,
    shape: ShapeOpt = None,
    args: ArgOpt = None,
    tensor: TensorOpt = None,
    domain: DomainOpt = None,
    dtype: DtypeOpt = None,
    seed: SeedOpt = None,
    second_order: SecondOrderOpt = None,
    forward_ad: ForwardAdOpt = None,
    format: clikit.FormatOpt = None,
    output: clikit.OutputOpt = None,
    fail_on: clikit.FailOnOpt = None,
    config: clikit.ConfigOpt = None,
    width: clikit.WidthOpt = None,
    debug: clikit.DebugOpt = False,
) -> None:
    """Custom Functions checked against numerical derivatives (HELP is the --help)."""
    with clikit.guarded(debug):
        where = outputs.plan(format, output)
        settings = config_mod.load(config, flags={"fail-on": fail_on})
        options = clikit.options_from(
            api.GradcheckOptions,
            locals(),
            shape=dict(parse_shape(s) for s in shape or []),
            args=dict(parse_arg(a) for a in args or []),
            tensor=dict(parse_tensor(t) for t in tensor or []),
            domain=dict(parse_domain(d) for d in domain or []),
        )
        with clikit.user_stdout_to_stderr(where.to_stdout):
            report = api.gradcheck(specs or [], options, settings)
        if debug:
            for error in (e for t in report.targets for e in t.errors):
                sys.stderr.write(f"{error.check}: {error.traceback}\n")
        outcome = report.outcome()
        outputs.deliver(where, outcome, settings.fail_on, width)
        raise typer.Exit(exit_code([outcome], settings.fail_on))
