"""`gradscope graph` as one function: the autograd graph of a target's loss, coloured by
each parameter's gradient health, drawn to a file or returned as bytes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gradscope import config
from gradscope import graph as graph_mod
from gradscope.api.arguments import check_spec, settings_or_default
from gradscope.api.inspecting import inspect
from gradscope.graph import statuses_of
from gradscope.graph.result import GraphResult
from gradscope.inspector import targets
from gradscope.report.write import destination, write_file

if TYPE_CHECKING:
    from gradscope.graph.result import GraphResult


def graph(
    target: str,
    *,
    output: str | None = None,
    format: str | None = None,
    collapse: str = "auto",
    depth: int | None = None,
    show_saved: bool = False,
    show_attrs: bool = False,
    probe: bool = True,
    settings: config.Settings | None = None,
) -> GraphResult:
    """`gradscope graph TARGET` without the printing. `output`: the file to write (its
    extension picks the format unless `format` does: png, svg, pdf or dot); None: the
    picture is `result.picture` (DOT by default). `probe`: one forward+backward first,
    to colour the parameters by status."""

    fmt = graph_mod.format_for(output, format)
    graph_mod.check_dot(fmt)
    path = destination(output, "--output")
    settings = settings_or_default(settings)
    t = targets.load(check_spec(target))
    statuses = probe_statuses(t.model, t.batch, t.loss_fn, settings) if probe else None
    options = graph_mod.GraphOptions(
        collapse=collapse, depth=depth, show_saved=show_saved, show_attrs=show_attrs
    )
    drawing = graph_mod.graph_of(
        t.model, t.batch, t.loss_fn, statuses=statuses, options=options, label=t.label
    )
    picture = graph_mod.render(drawing, fmt)
    written = path if path and path != "-" else None
    if written is not None:
        write_file(written, picture)
    return GraphResult(t.label, drawing, written, picture=b"" if written else picture)


def probe_statuses(
    model: Any, batch: Any, loss_fn: Any = None, settings: Any = None
) -> dict[str, str]:
    """Each parameter's status word (what the colours show), from one probe pass."""

    return statuses_of(inspect(model, batch, loss_fn, settings=settings, explain=False))
