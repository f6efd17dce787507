"""`gradscope graph`: the autograd graph of a target's loss, coloured by gradient health.

Thin on purpose: options in, gradscope.graph does the work, one line of
result on stderr. No torch at import time (`gradscope --help` imports this).
"""

from __future__ import annotations

import sys
from enum import Enum
from typing import Annotated

import typer

from gradscope.cli import common as clikit
from gradscope.errors import ExitCode, GradscopeError, TargetError


class GraphFormat(str, Enum):
    png = "png"
    svg = "svg"
    pdf = "pdf"
    dot = "dot"


class Collapse(str, Enum):
    auto = "auto"
    modules = "modules"
    none = "none"


def graph(
    target: Annotated[
        str | None,
        typer.Argument(
            metavar="TARGET",
            help="As for `gradscope inspect`; default: the first "
            "[[tool.gradscope.inspect]] target of pyproject.toml (or of --config).",
        ),
    ] = None,
    out: Annotated[
        str | None,
        typer.Option(
            "--output",
            "-o",
            "--out",
            metavar="FILE",
            help="Where to write the picture (atomically); its "
            "extension picks the format. Without it, DOT text goes to stdout.",
        ),
    ] = None,
    format: Annotated[
        GraphFormat | None,
        typer.Option(
            "--format",
            "-f",
            help="png, svg, pdf or dot (Graphviz source; needs no Graphviz). "
            "Default: from --out's extension.",
        ),
    ] = None,
    collapse: Annotated[
        Collapse,
        typer.Option(
            "--collapse",
            help="modules: one node per nn.Module with its op count; none: every "
            "backward op; auto: modules above 300 nodes (and says so).",
        ),
    ] = Collapse.auto,
    depth: Annotated[
        int | None,
        typer.Option(
            "--depth",
            min=1,
            metavar="N",
            help="One node per module N levels deep (--depth 2: one node per transformer "
            "block); implies --collapse modules unless --collapse none. Default: the "
            "deepest level that keeps the picture readable.",
        ),
    ] = None,
    show_saved: Annotated[
        bool,
        typer.Option(
            "--show-saved",
            help="Draw the tensors backward ops saved (torchviz's show_saved); "
            "collapsed, each module counts its saved tensors and bytes.",
        ),
    ] = False,
    show_attrs: Annotated[
        bool,
        typer.Option(
            "--show-attrs",
            help="Print each backward op's saved attributes (torchviz's "
            "show_attrs); full graph only.",
        ),
    ] = False,
    probe: Annotated[
        bool,
        typer.Option(
            "--probe/--no-probe", help="Run one forward+backward to colour parameters by status."
        ),
    ] = True,
    config: clikit.ConfigOpt = None,
    debug: clikit.DebugOpt = False,
) -> None:
    """Draw the autograd graph of TARGET's loss, showing where gradients break.

    Parameters are labelled with their names and shapes and coloured by the
    probe's status: red non-finite, orange exploding, yellow vanishing, pale
    yellow all-zero, blue healthy. Parameters whose grad is None are not in
    the graph, so the legend lists them. Needs Graphviz's `dot` for png, svg
    and pdf.

    Examples:

    \b
      gradscope graph tiny-transformer -o graph.png
      gradscope graph models/net.py:build -o graph.svg --collapse modules --depth 2
      gradscope graph nan-loss --format dot > graph.dot
      gradscope graph -o graph.pdf         # the target configured in pyproject.toml
    """
    with clikit.guarded(debug):
        from gradscope import config as config_mod
        from gradscope import graph as graph_mod

        fmt = graph_mod.format_for(out, format.value if format else None)
        graph_mod.check_dot(fmt)
        from gradscope.report.write import destination, to_stdout

        path = destination(out)
        if out is None and fmt != "dot" and sys.stdout.isatty():
            raise GradscopeError(f"{fmt} is binary: give --output FILE.{fmt}, or --format dot")
        settings = config_mod.load(config)
        with clikit.user_stdout_to_stderr(to_stdout(path)):
            drawing = _draw(
                target or _configured_target(settings, config),
                settings,
                probe,
                graph_mod.GraphOptions(
                    collapse=collapse.value,
                    depth=depth,
                    show_saved=show_saved,
                    show_attrs=show_attrs,
                ),
            )
        _write(graph_mod.render(drawing, fmt), path)
        _say(drawing, out)
        raise typer.Exit(ExitCode.OK)


def _configured_target(settings, config: str | None) -> str:
    """The first [[inspect]] target, resolved against the file that names it."""
    if settings.inspect:
        from gradscope.gate.check import resolve

        return resolve(settings.inspect[0])
    where = config or "pyproject.toml ([tool.gradscope])"
    raise TargetError(
        f"no TARGET given and {where} configures none; pass one "
        "(gradscope graph TARGET --out graph.png) or add an [[inspect]] entry "
        "with a target"
    )


def _draw(spec: str, settings, probe: bool, options):
    from gradscope import graph as graph_mod
    from gradscope.inspector import targets

    t = targets.load(spec)
    statuses = graph_mod.probe_statuses(t.model, t.batch, t.loss_fn, settings) if probe else None
    return graph_mod.graph_of(
        t.model, t.batch, t.loss_fn, statuses=statuses, options=options, label=t.label
    )


def _write(data: bytes, out: str | None) -> None:
    from gradscope.report.write import to_stdout, write_file

    if to_stdout(out):
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        assert out is not None
        write_file(out, data)


def _say(drawing, out: str | None) -> None:
    """One line of result on stderr, plus what the picture had to leave out or collapse."""
    where = f"wrote {out}" if out and out != "-" else "graph"
    what = (
        f"{drawing.nodes} nodes, one per module ({drawing.full_nodes} uncollapsed)"
        if drawing.collapsed
        else f"{drawing.nodes} nodes"
    )
    lines = [f"{where}: {what}", *list(drawing.notes)]
    if drawing.absent:
        lines.append(
            f"{len(drawing.absent)} parameters have no grad (listed in the legend): "
            + ", ".join(a.split(" ")[0] for a in drawing.absent[:5])
            + (" ..." if len(drawing.absent) > 5 else "")
        )
    sys.stderr.write("".join(f"gradscope: {line}\n" for line in lines))
