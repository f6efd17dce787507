"""The autograd graph of a loss, drawn to answer: where are my gradients broken?

Built on torchviz's picture (grey backward ops, blue leaves, green output,
`show_saved`/`show_attrs`) with what it lacks: parameter leaves carry names,
shapes and the probe's status colour; parameters with no grad are listed in a
legend instead of silently missing; the walk is iterative (torchviz's
recursion fails on deep graphs, szagoruyko/pytorchviz#57); big graphs collapse
to one node per module (graph_collapse); a missing `dot` is found before any
model code runs; output is bytes, written atomically by the caller.
torch, torchviz and graphviz are imported lazily.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gradscope.errors import GradscopeError, GraphvizMissing
from gradscope.graph import collapse as graph_collapse
from gradscope.graph import style
from gradscope.graph.compat import import_torchviz
from gradscope.graph.walk import Walk, param_names, saved_key, walk

# torch and graphviz, and the modules that load them, are imported in functions:
# `gradscope --help` must not load them

FORMATS = ("png", "svg", "pdf", "dot", "json")
"""What `gradscope graph` writes: a picture, its DOT source, or its JSON document."""
EXTENSIONS = {
    ".png": "png",
    ".svg": "svg",
    ".pdf": "pdf",
    ".dot": "dot",
    ".gv": "dot",
    ".json": "json",
}
NEEDS_NO_DOT = ("dot", "json")
COLLAPSE_ABOVE = 300
"""`--collapse auto` draws one node per module when the full graph has more nodes than this."""
INSTALL_HINT = (
    "Graphviz's `dot` is not on PATH; install Graphviz (apt-get install graphviz, "
    "brew install graphviz, conda install -c conda-forge graphviz, or "
    "https://graphviz.org/download/) or write DOT text with --format dot"
)


@dataclass(frozen=True)
class DrawOptions:
    """How the picture is drawn (what `api.GraphOptions`, the command's options, passes on)."""

    collapse: str = "auto"
    """auto (modules above COLLAPSE_ABOVE nodes), modules or none."""
    depth: int | None = None
    """When collapsing, merge modules deeper than this into their ancestor."""
    show_saved: bool = False
    show_attrs: bool = False
    max_nodes: int = COLLAPSE_ABOVE


@dataclass
class Drawing:
    graph: Any
    """A graphviz.Digraph."""
    nodes: int
    """Nodes drawn, legend excluded."""
    full_nodes: int
    """Nodes the uncollapsed graph has."""
    collapsed: bool
    absent: tuple[str, ...]
    """Parameters that require grad but are not in the graph: their grad is None."""
    notes: tuple[str, ...]
    """What the user should be told (also in the legend)."""
    cuts: tuple[str, ...] = ()
    """Where the forward cut the graph (`detach` at file:line), each site once."""

    @property
    def source(self) -> str:
        return self.graph.source


# --- before any model code runs ------------------------------------------------------------


def format_for(out: str | None, fmt: str | None) -> str:
    """--format wins; else the extension of --out; no --out means DOT on stdout."""
    if fmt:
        if fmt.lower() not in FORMATS:
            raise GradscopeError(f"unknown graph format {fmt!r} (use {', '.join(FORMATS)})")
        return fmt.lower()
    if out is None or out == "-":
        return "dot"
    ext = os.path.splitext(out)[1].lower()
    if ext not in EXTENSIONS:
        raise GradscopeError(
            f"cannot tell the format of {out!r} from its extension; end it in "
            f"{', '.join(EXTENSIONS)} or pass --format"
        )
    return EXTENSIONS[ext]


def check_dot(fmt: str) -> None:
    """Raise GraphvizMissing (exit 2, one line) when rendering `fmt` needs a `dot` we lack."""
    if fmt not in NEEDS_NO_DOT and shutil.which("dot") is None:
        raise GraphvizMissing(INSTALL_HINT)


# --- drawing ---------------------------------------------------------------------------------


def full_node_count(w: Walk) -> int:
    return len(w.fns) + len({saved_key(*s) for s in w.saved}) + 1


def draw_full(
    w: Walk,
    loss: Any,
    names: dict[int, list[str]],
    statuses: dict[str, str] | None,
    options: DrawOptions,
) -> tuple[Any, int]:
    """torchviz's picture, with a parameter drawn in place of its AccumulateGrad box."""
    dot, ids = style.new_digraph(), {k: f"n{i}" for i, k in enumerate(w.fns)}
    label_op = _op_labeller(options.show_attrs)
    for k, fn in w.fns.items():
        var = w.variables.get(k)
        if var is None:
            dot.node(ids[k], label_op(fn), fillcolor=style.OP.colour)
        elif id(var) in names:
            name, *aliases = names[id(var)]
            status = statuses.get(name) if statuses is not None else None
            dot.node(
                ids[k],
                style.param_label(name, var.shape, status, aliases),
                fillcolor=style.param_swatch(status).colour,
            )
        else:
            dot.node(ids[k], f"input\n{style.shape_text(var.shape)}", fillcolor=style.INPUT.colour)
    for src, dst in w.edges:
        dot.edge(ids[src], ids[dst])
    saved_ids: dict[tuple[Any, ...], str] = {}
    for fn_id, name, t in w.saved:
        key = saved_key(fn_id, name, t)
        if key not in saved_ids:
            saved_ids[key] = f"s{len(saved_ids)}"
            dot.node(
                saved_ids[key], f"{name}\n{style.shape_text(t.shape)}", fillcolor=style.SAVED.colour
            )
        dot.edge(saved_ids[key], ids[fn_id], dir="none")
    style.output_node(dot, loss, ids.get(id(loss.grad_fn)) if loss.grad_fn is not None else None)
    return dot, len(w.fns) + len(saved_ids) + 1


def _draw_cuts(dot: Any, w: Walk, cuts: Any) -> int:
    """A dashed red box per cut, pointing at the op that used the cut tensor next."""
    if cuts is None:
        return 0
    ids = {k: f"n{i}" for i, k in enumerate(w.fns)}  # as draw_full numbers them
    drawn = 0
    for fn_id, sites in cuts.sites.items():
        if fn_id not in ids:
            continue
        node = f"cut{drawn}"
        dot.node(node, "graph cut here:\n" + "\n".join(sites), **style.CUT_ATTR)
        dot.edge(node, ids[fn_id], style="dashed", color=style.CUT_COLOUR)
        drawn += 1
    return drawn


def _op_labeller(show_attrs: bool) -> Callable[[Any], str]:
    if not show_attrs:
        return lambda fn: type(fn).__name__
    get_fn_name = import_torchviz().dot.get_fn_name
    return lambda fn: get_fn_name(fn, True, 50)


def _collapsed(options: DrawOptions, full: int, trace: Any) -> bool:
    """Whether the picture is one node per module: asked for, or more nodes than the bound
    (--depth means "one node per module N levels deep": it implies collapsing)."""
    if options.collapse == "modules" and trace is None:
        raise GradscopeError("collapsing by module needs a traced forward pass: use graph_of()")
    wanted = options.collapse == "modules" or (
        options.collapse == "auto" and (full > options.max_nodes or options.depth is not None)
    )
    return trace is not None and wanted


def draw(
    loss: Any,
    model: Any = None,
    statuses: dict[str, str] | None = None,
    trace: Any = None,
    options: DrawOptions = DrawOptions(),
    title: str = "gradscope graph",
    cuts: Any = None,
) -> Drawing:
    """Draw `loss`'s graph; `model` names the parameters, `statuses` colours them,
    `trace` (graph_collapse.trace_modules around the forward) makes collapsing possible,
    and `cuts` (graph.cuts.watch around the forward) marks where the forward cut it."""

    w = walk(loss, options.show_saved)
    names = param_names(model) if model is not None else {}
    full = full_node_count(w)
    notes = (
        []
        if loss.grad_fn is not None
        else ["the loss has no grad_fn: no parameter that requires grad reaches it"]
    )
    collapse = _collapsed(options, full, trace)
    if collapse:
        assert trace is not None
        dot, drawn, depth = graph_collapse.draw_modules(w, loss, names, statuses, trace, options)
        if options.collapse == "auto" and options.depth is None:
            notes.append(
                f"{full} nodes (more than {options.max_nodes}): drawn one node per "
                f"module, {depth} levels deep; --depth N to zoom, --collapse none for every op"
            )
    else:
        dot, drawn = draw_full(w, loss, names, statuses, options)
        drawn += _draw_cuts(dot, w, cuts)
    sites = sorted({s for fn_sites in (cuts.sites.values() if cuts else ()) for s in fn_sites})
    notes += [f"graph cut by {s}" for s in sites]
    absent, frozen = _missing(model, w)
    if any(type(fn).__name__ == _REENTRANT for fn in w.fns.values()):
        hidden = [a for a in absent if (statuses or {}).get(a.split(" ")[0], "none") != "none"]
        absent = [a for a in absent if a not in hidden]
        notes.append(_reentrant_note(len(hidden), statuses is not None))
    inputs = any(id(v) not in names for v in w.variables.values())
    swatches = _swatches(statuses, options, collapse, inputs)
    dot.node(
        "legend",
        style.legend(title, swatches, absent, frozen, notes),
        shape="plain",
        fillcolor="white",
    )
    return Drawing(dot, drawn, full, collapse, tuple(absent), tuple(notes), tuple(sites))


_REENTRANT = "CheckpointFunctionBackward"


def _reentrant_note(hidden: int, probed: bool) -> str:
    """A reentrant checkpoint's node is closed: its region's graph is made in the backward."""
    text = (
        f"{_REENTRANT}: a reentrant torch.utils.checkpoint builds its region's graph only "
        "during the backward, so the picture cannot open it"
    )
    if hidden:
        return text + f"; the {hidden} parameters inside got their gradients (probe)"
    return text + ("" if probed else "; the parameters inside are listed as not in this graph")


def _missing(model: Any, w: Walk) -> tuple[list[str], list[str]]:
    """Parameters the picture cannot show: not reached from the loss, and frozen."""
    reached = {id(v) for v in w.variables.values()}
    absent: list[str] = []
    frozen: list[str] = []
    for name, p in model.named_parameters() if model is not None else ():
        if not p.requires_grad:
            frozen.append(f"{name} {style.shape_text(p.shape)}")
        elif id(p) not in reached:
            absent.append(f"{name} {style.shape_text(p.shape)}")
    return absent, frozen


def _swatches(
    statuses: dict[str, str] | None, options: DrawOptions, collapsed: bool, inputs: bool
) -> list[style.Swatch]:
    params = list(style.STATUS.values()) if statuses is not None else [style.UNPROBED]
    extra = [style.MODULE if collapsed else style.OP] + ([style.INPUT] if inputs else [])
    if options.show_saved and not collapsed:
        extra.append(style.SAVED)
    return params + extra + [style.OUTPUT]


# --- from a model, and to bytes ------------------------------------------------------------


def statuses_of(report: Any) -> dict[str, str]:
    """Each parameter's status word (what the colours show), from an inspect Report."""
    return {p.name: report.status(p) for p in report.stats.params}


def graph_of(
    model: Any,
    batch: Any,
    loss_fn: Callable[[Any], Any] | None = None,
    *,
    statuses: dict[str, str] | None = None,
    options: DrawOptions = DrawOptions(),
    label: str = "",
) -> Drawing:
    """One forward pass (the model left as found), then its loss's graph drawn."""
    import torch

    from gradscope.graph import cuts as graph_cuts
    from gradscope.inspector import hooks, preserve

    tracing = options.collapse != "none"
    with (
        preserve.preserved_state(model),
        graph_collapse.trace_modules(model, tracing) as trace,
        torch.enable_grad(),
        graph_cuts.watch() as cuts,
    ):
        loss, source = hooks.forward_and_loss(model, batch, loss_fn)
    title = f"{label or type(model).__name__}: loss = {source}"
    return draw(loss, model, statuses, trace if tracing else None, options, title, cuts)


def render(drawing: Drawing, fmt: str) -> bytes:
    """The file's bytes; nothing is written here, so a failure leaves no file behind."""
    if fmt == "dot":
        return drawing.source.encode()
    import graphviz

    try:
        return drawing.graph.pipe(format=fmt)
    except graphviz.ExecutableNotFound:
        raise GraphvizMissing(INSTALL_HINT) from None
    except graphviz.CalledProcessError as exc:
        err = (exc.stderr or b"").decode(errors="replace").strip().splitlines()
        raise GradscopeError(
            f"Graphviz `dot` failed to render {fmt}: "
            f"{err[0] if err else f'exit status {exc.returncode}'}"
        ) from None
