"""`gradscope graph` as one function: the autograd graph of a target's loss, coloured by
each parameter's gradient health, drawn to a file or returned as bytes; or, as JSON, what
the drawing found."""

from __future__ import annotations

from typing import Any

from gradscope import config
from gradscope import graph as graph_mod
from gradscope.api.arguments import check_spec, settings_or_default
from gradscope.api.inspecting import inspect
from gradscope.api.options import GraphOptions
from gradscope.errors import TargetError
from gradscope.gate.check import resolve
from gradscope.graph import statuses_of
from gradscope.graph.result import GraphResult, Probed
from gradscope.inspector import model_file
from gradscope.report.json import dumps
from gradscope.report.write import destination, write_file


def graph(
    target: str | None,
    options: GraphOptions | None = None,
    settings: config.Settings | None = None,
    **given: object,
) -> GraphResult:
    """`gradscope graph TARGET` without the printing. `given`: GraphOptions fields over
    `options`. `output`: the file to write (its extension picks the format unless `format`
    does: png, svg, pdf, dot or json); None: the picture is `result.picture` (DOT by
    default). `probe`: one forward+backward first, to colour the parameters by status.
    TARGET is resolved as `inspect` resolves it, a model file or class without a batch
    included (`result.note` says what was built); None: the settings' first [[inspect]]
    target."""

    options = GraphOptions.over(options, given)
    fmt = graph_mod.format_for(options.output, options.format)
    graph_mod.check_dot(fmt)
    path = destination(options.output, "--output")
    settings = settings_or_default(settings)
    spec = configured_target(settings) if target is None else target
    built = model_file.resolve(check_spec(spec))
    t = built.target
    probed = _probe(t.model, t.batch, t.loss_fn, settings) if options.probe else None
    drawing = graph_mod.graph_of(
        t.model,
        t.batch,
        t.loss_fn,
        statuses=probed.statuses if probed else None,
        options=graph_mod.DrawOptions(
            options.collapse, options.depth, options.show_saved, options.show_attrs
        ),
        label=t.label,
    )
    written = path if path and path != "-" else None
    result = GraphResult(t.label, drawing, written, probed=probed, note=built.note, format=fmt)
    picture = (
        dumps(result.outcome().to_dict()).encode()
        if fmt == "json"
        else graph_mod.render(drawing, fmt)
    )
    if written is not None:
        write_file(written, picture)
        return result
    return result.with_picture(picture)


def configured_target(settings: config.Settings) -> str:
    """The first [[inspect]] target, resolved against the file that names it."""
    if settings.inspect:
        return resolve(settings.inspect[0])
    raise TargetError(
        "no TARGET given and the config (pyproject.toml's [tool.gradscope], or --config) "
        "configures none; pass one (gradscope graph TARGET --output graph.png) or add an "
        "[[inspect]] entry with a target"
    )


def probe_statuses(
    model: Any, batch: Any, loss_fn: Any = None, settings: Any = None
) -> dict[str, str]:
    """Each parameter's status word (what the colours show), from one probe pass."""

    return _probe(model, batch, loss_fn, settings).statuses


def _probe(model: Any, batch: Any, loss_fn: Any, settings: Any) -> Probed:
    """One probe pass: each parameter's status, and the findings `inspect` reports (its
    explanation of a cut or a NaN included, which runs only where there is one)."""
    report = inspect(model, batch, loss_fn, settings=settings)
    judged = report.outcome()
    return Probed(statuses_of(report), tuple(judged.findings), tuple(judged.ignored))
