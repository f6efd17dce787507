"""`gradscope graph`: the autograd graph of a target's loss, coloured by gradient health.

Thin on purpose: options in, gradscope.graph does the work, one line of
result on stderr. No torch at import time (`gradscope --help` imports this).
"""

from __future__ import annotations

import sys
from enum import Enum
from typing import Annotated

import typer

from gradscope import api
from gradscope import config as config_mod
from gradscope.cli import common as clikit
from gradscope.errors import ExitCode, GradscopeError
from gradscope.graph import format_for
from gradscope.report import outputs


class GraphFormat(str, Enum):
    png = "png"
    svg = "svg"
    pdf = "pdf"
    dot = "dot"
    json = "json"


class Collapse(str, Enum):
    auto = "auto"
    modules = "modules"
    none = "none"


TargetOpt = Annotated[
    str | None,
    typer.Argument(
        metavar="TARGET",
        help="As for `gradscope inspect`; default: the first "
        "[[tool.gradscope.inspect]] target of pyproject.toml (or of --config).",
    ),
]

OutOpt = Annotated[
    str | None,
    typer.Option(
        "--output",
        "-o",
        "--out",
        metavar="FILE",
        help="Where to write the picture or the JSON document (atomically); its extension "
        "picks the format (.png, .svg, .pdf, .dot or .gv, .json). Without it, DOT text "
        "goes to stdout.",
    ),
]

FormatOpt = Annotated[
    GraphFormat | None,
    typer.Option(
        "--format",
        "-f",
        help="png, svg, pdf, dot (Graphviz source) or json (what was drawn, the probe's "
        "findings and the graph's cuts; dot and json need no Graphviz). "
        "Default: from --output's extension.",
    ),
]

CollapseOpt = Annotated[
    Collapse,
    typer.Option(
        "--collapse",
        help="modules: one node per nn.Module with its op count; none: every "
        "backward op; auto: modules above 300 nodes (and says so).",
    ),
]

DepthOpt = Annotated[
    int | None,
    typer.Option(
        "--depth",
        min=1,
        metavar="N",
        help="One node per module N levels deep (--depth 2: one node per transformer "
        "block); implies --collapse modules unless --collapse none. Default: the "
        "deepest level that keeps the picture readable.",
    ),
]

ShowSavedOpt = Annotated[
    bool,
    typer.Option(
        "--show-saved",
        help="Draw the tensors backward ops saved (torchviz's show_saved); "
        "collapsed, each module counts its saved tensors and bytes.",
    ),
]

ShowAttrsOpt = Annotated[
    bool,
    typer.Option(
        "--show-attrs",
        help="Print each backward op's saved attributes (torchviz's show_attrs); full graph only.",
    ),
]

ProbeOpt = Annotated[
    bool,
    typer.Option(
        "--probe/--no-probe", help="Run one forward+backward to colour parameters by status."
    ),
]

# the --help text (as a docstring it would make the function too long to read)
HELP = """Draw the autograd graph of TARGET's loss, showing where gradients break.

Parameters are labelled with their names and shapes and coloured by the
probe's status: red non-finite, orange exploding, yellow vanishing, pale
yellow all-zero, blue healthy. Parameters whose grad is None are not in
the graph, so the legend lists them. Needs Graphviz's `dot` for png, svg
and pdf; --format json writes what was drawn as the common JSON document.

Examples:

\b
  gradscope graph tiny-transformer -o graph.png
  gradscope graph models/net.py:build -o graph.svg --collapse modules --depth 2
  gradscope graph nan-loss --format dot > graph.dot
  gradscope graph detached-middle -o graph.json   # findings, cuts, statuses
  gradscope graph model.py -o graph.png           # a model class: built as inspect does
  gradscope graph -o graph.pdf         # the target configured in pyproject.toml

"""


def graph(
    target: TargetOpt = None,
    output: OutOpt = None,
    format: FormatOpt = None,
    collapse: CollapseOpt = Collapse.auto,
    depth: DepthOpt = None,
    show_saved: ShowSavedOpt = False,
    show_attrs: ShowAttrsOpt = False,
    probe: ProbeOpt = True,
    config: clikit.ConfigOpt = None,
    debug: clikit.DebugOpt = False,
) -> None:
    """The autograd graph of TARGET's loss, drawn (HELP is the --help)."""
    params = dict(locals())
    with clikit.guarded(debug):
        fmt = format_for(output, format.value if format else None)
        if output is None and fmt not in ("dot", "json") and sys.stdout.isatty():
            raise GradscopeError(f"{fmt} is binary: give --output FILE.{fmt}, or --format dot")
        settings = config_mod.load(config)
        with clikit.user_stdout_to_stderr(output is None or output == "-"):
            options = clikit.options_from(
                api.GraphOptions, params, format=fmt, collapse=collapse.value
            )
            result = api.graph(target, options, settings)
        if result.path is None:
            sys.stdout.buffer.write(result.picture)
            sys.stdout.flush()
        outputs.to_stderr(result.outcome())
        raise typer.Exit(ExitCode.OK)
