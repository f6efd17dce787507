"""One node per nn.Module: which module created each backward op, and the collapsed picture.

Autograd numbers the nodes it creates, in order, per thread (`_sequence_nr`).
Forward pre- and post-hooks note that number when a module starts and ends,
so every op of the graph falls in the innermost module call around it: a
sweep over sorted numbers, no recursion and no per-op hooks. Modules with
children become Graphviz clusters, so the nesting stays visible.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from gradscope.fmt import human_bytes
from gradscope.graph import style
from gradscope.graph.walk import saved_key

# torch and graphviz, and the modules that load them, are imported in functions:
# `gradscope --help` must not load them

INPUTS = "<inputs>"
OUTSIDE = "<outside>"
"""Ops made outside every module call: the loss_fn, the default reduction."""
Key = tuple[str, str | None]
"""(module name, the child call its ops follow): one node of the collapsed graph."""
ROOT = ""
SPECIAL = (ROOT, INPUTS, OUTSIDE)
MAX_PARAM_LINES = 6
"""Parameter lines in a module's label; the rest are counted."""

_probe_leaf: Any = None


MODULE_NODES = 60
"""Auto depth: the most module nodes a collapsed picture should have."""


@dataclass
class ModuleTrace:
    events: list[tuple[int, int, str]] = field(default_factory=list)
    """(sequence number, +1 enter / -1 exit, module name), in call order."""
    kinds: dict[str, str] = field(default_factory=dict)
    """Module name → class name."""


def _next_sequence_nr() -> int | None:
    """The number autograd gives its next node: a throwaway view op takes one and tells it."""
    global _probe_leaf
    import torch

    if torch.is_inference_mode_enabled():
        return None
    if _probe_leaf is None:
        _probe_leaf = torch.empty(0, requires_grad=True)
    with torch.enable_grad():
        node = _probe_leaf.view_as(_probe_leaf).grad_fn
    return node._sequence_nr() if node is not None else None


@contextmanager
def trace_modules(model: Any, enabled: bool = True) -> Iterator[ModuleTrace]:
    """Note when each module call starts and ends; every hook is removed afterwards."""
    from gradscope.inspector import hooks

    trace = ModuleTrace(kinds={n: type(m).__name__ for n, m in model.named_modules()})
    if not enabled:
        yield trace
        return
    with hooks.module_hooks(
        model,
        pre=lambda name, _m: _mark(trace, 1, name),
        post=lambda name, _m, _out: _mark(trace, -1, name),
    ):
        yield trace


def _mark(trace: ModuleTrace, step: int, name: str) -> None:
    seq = _next_sequence_nr()
    if seq is not None:
        trace.events.append((seq, step, name))


def owners(fns: dict[int, Any], trace: ModuleTrace) -> dict[int, tuple[int, str, str | None]]:
    """Backward node id → (sequence number, the innermost module running when autograd made it,
    the last child that had finished inside that call)."""
    ops = sorted((_seq(fn), k) for k, fn in fns.items() if not hasattr(fn, "variable"))
    events = sorted(trace.events)
    out: dict[int, tuple[int, str, str | None]] = {}
    stack: list[list[Any]] = []  # [module name, last finished child]
    i = 0
    for seq, k in ops:
        while i < len(events) and events[i][0] < seq:
            _, step, name = events[i]
            if step > 0:
                stack.append([name, None])
            elif stack:
                stack.pop()
                if stack:
                    stack[-1][1] = name
            i += 1
        out[k] = (seq, *stack[-1]) if stack else (seq, OUTSIDE, None)
    return out


def _seq(fn: Any) -> int:
    try:
        return int(fn._sequence_nr())
    except (AttributeError, RuntimeError):
        return -1


def truncate(name: str, depth: int | None) -> str:
    if depth is None or name in SPECIAL:
        return name
    return ".".join(name.split(".")[:depth])


def _key(name: str, after: str | None, depth: int | None) -> Key:
    """A module's own ops split at its child calls (Block: the add after attn, the one after
    mlp), which keeps the collapsed graph acyclic; merged modules are one node."""
    level = 0 if name in SPECIAL else name.count(".") + 1
    if depth is not None and level >= depth:
        return (truncate(name, depth), None)
    return (name, truncate(after, depth) if after else None)


@dataclass
class Param:
    name: str
    shape: tuple[int, ...]
    status: str | None
    index: int
    """Position in named_parameters, for a stable order."""
    tied_to: str | None = None


@dataclass
class Group:
    first: int = -1
    """Lowest sequence number of its ops: forward order."""
    ops: int = 0
    params: list[Param] = field(default_factory=list)
    saved: dict[tuple[Any, ...], int] = field(default_factory=dict)
    """Saved tensor key → bytes, with --show-saved."""


def groups_of(
    w: Any,
    names: dict[int, list[str]],
    statuses: dict[str, str] | None,
    trace: ModuleTrace,
    depth: int | None,
) -> tuple[dict[int, Key], dict[Key, Group]]:
    """Each backward node's group (module, segment), and what each group holds."""
    where: dict[int, Key] = {}
    groups: dict[Key, Group] = {}
    for k, (seq, name, after) in sorted(owners(w.fns, trace).items(), key=lambda kv: kv[1][0]):
        where[k] = _key(name, after, depth)
        g = groups.setdefault(where[k], Group(first=seq))
        g.ops += 1
    _add_params(w, names, statuses, depth, where, groups)

    for fn_id, name, t in w.saved:
        groups[where[fn_id]].saved[saved_key(fn_id, name, t)] = t.numel() * t.element_size()
    return where, groups


def _add_params(
    w: Any,
    names: dict[int, list[str]],
    statuses: dict[str, str] | None,
    depth: int | None,
    where: dict[int, Key],
    groups: dict[Key, Group],
) -> None:
    """A parameter joins the segment of its module that uses it (tied names join theirs)."""
    consumer: dict[int, int] = {}
    for src, dst in w.edges:
        consumer.setdefault(src, dst)
    index = {pid: i for i, pid in enumerate(names)}
    for k, var in w.variables.items():
        pnames = names.get(id(var))
        module = truncate(pnames[0].rpartition(".")[0], depth) if pnames else INPUTS
        near = where.get(consumer.get(k, -1))
        where[k] = near if near is not None and near[0] == module else (module, None)
        first = groups[near].first if near is not None else -1
        g = groups.setdefault(where[k], Group(first=first))
        if not pnames:
            g.params.append(Param("input", tuple(var.shape), None, -1))
            continue
        status = statuses.get(pnames[0]) if statuses is not None else None
        g.params.append(Param(pnames[0], tuple(var.shape), status, index[id(var)]))
        for alias in pnames[1:]:
            owner = truncate(alias.rpartition(".")[0], depth)
            keys = sorted((key for key in groups if key[0] == owner), key=lambda q: groups[q].first)
            if keys and keys[0] != where[k]:
                groups[keys[0]].params.append(
                    Param(alias, tuple(var.shape), status, index[id(var)], tied_to=pnames[0])
                )


def _local(name: str, prefix: str) -> str:
    return name.removeprefix(prefix) if prefix else name


def module_label(key: Key, kind: str, g: Group, segmented: bool) -> str:
    """Name, class and op count, then the parameters with shapes (and status when not ok)."""
    name, after = key
    prefix = name + "." if name not in SPECIAL else ""
    if name == INPUTS:
        lines = ["inputs", f"{len(g.params)} leaf tensor{'s' * (len(g.params) != 1)}"]
    elif name == OUTSIDE:
        lines = ["(outside the model)", f"loss_fn etc. · {g.ops} op{'s' * (g.ops != 1)}"]
    else:
        lines = [name or "(model)", f"{kind} · {g.ops} op{'s' * (g.ops != 1)}"]
    if segmented:
        lines.append(f"after {_local(after, prefix)}" if after else "first ops")
    params = sorted(g.params, key=lambda p: p.index)
    flagged = [p for p in params if p.status and p.status != "ok"]
    if len(params) > MAX_PARAM_LINES and not flagged:
        # a healthy block is one line, so a stack of blocks stays a readable picture
        count = sum(math.prod(p.shape) for p in params)
        healthy = ", all healthy" if all(p.status == "ok" for p in params) else ""
        lines.append(f"{len(params)} parameters ({count:,} elements){healthy}")
        params = []
    elif len(params) > MAX_PARAM_LINES:
        params = flagged + [p for p in params if p not in flagged]
    for p in params[:MAX_PARAM_LINES]:
        word = f" {p.status}" if p.status and p.status != "ok" else ""
        tie = f" = {p.tied_to}" if p.tied_to else ""
        lines.append(f"{_local(p.name, prefix)}{tie} {style.shape_text(p.shape)}{word}")
    if len(params) > MAX_PARAM_LINES:
        lines.append(f"+ {len(params) - MAX_PARAM_LINES} more parameters")
    if g.saved:
        lines.append(f"saved: {len(g.saved)} tensors, {human_bytes(sum(g.saved.values()))}")
    return "\n".join(lines)


def _colour(g: Group) -> str:
    if g.params and g.params[0].name == "input":
        return style.INPUT.colour
    if not g.params:
        return style.MODULE.colour
    return style.param_swatch(style.worst(p.status for p in g.params)).colour


def draw_modules(
    w: Any,
    loss: Any,
    names: dict[int, list[str]],
    statuses: dict[str, str] | None,
    trace: ModuleTrace,
    options: Any,
) -> tuple[Any, int, int]:
    """One node per module (op count and parameters inside), edges where data flows between.

    Returns the graph, its node count and the depth drawn: `options.depth`, or else the
    deepest level whose picture has at most MODULE_NODES nodes, so a 12-block transformer
    is a dozen block nodes, not a strip of 120 layers nobody can read on a screen.
    """
    depth = options.depth or auto_depth(w, names, statuses, trace)
    where, groups = groups_of(w, names, statuses, trace, depth)
    order = sorted(groups, key=lambda q: (q[0] != INPUTS, groups[q].first))
    ids = {key: f"m{i}" for i, key in enumerate(order)}
    segments = Counter(name for name, _ in order)
    top = style.new_digraph()
    clusters = _clusters([name for name, _ in order], trace)
    for key in order:
        box = _container(key[0], clusters, top, include_self=True)
        box.node(
            ids[key],
            module_label(key, trace.kinds.get(key[0], "Module"), groups[key], segments[key[0]] > 1),
            fillcolor=_colour(groups[key]),
        )
    _close_clusters(clusters, top)
    edges = Counter((where[s], where[d]) for s, d in w.edges if where[s] != where[d])
    for (src, dst), n in edges.items():
        top.edge(ids[src], ids[dst], **({"penwidth": "2"} if n > 1 else {}))
    style.output_node(top, loss, ids[where[id(loss.grad_fn)]] if loss.grad_fn is not None else None)
    return top, len(order) + 1, depth


def auto_depth(
    w: Any, names: dict[int, list[str]], statuses: dict[str, str] | None, trace: ModuleTrace
) -> int:
    deepest = max((n.count(".") + 1 for n in trace.kinds if n), default=1)
    for depth in range(deepest, 1, -1):
        if len(groups_of(w, names, statuses, trace, depth)[1]) <= MODULE_NODES:
            return depth
    return 1


def _clusters(order: list[str], trace: ModuleTrace) -> dict[str, Any]:
    """A Graphviz cluster for each module that has drawn modules inside it."""
    import graphviz

    names: set[str] = set()
    for name in order:
        parts = name.split(".") if name not in SPECIAL else []
        names.update(".".join(parts[:i]) for i in range(1, len(parts)))
    return {
        n: graphviz.Digraph(
            name=f"cluster_{i}",
            graph_attr=dict(
                label=f"{n} ({trace.kinds.get(n, 'Module')})",
                labeljust="l",
                style="rounded",
                color="grey60",
                fontname="monospace",
                fontsize="10",
            ),
        )
        for i, n in enumerate(sorted(names))
    }


def _container(name: str, clusters: dict[str, Any], top: Any, include_self: bool) -> Any:
    parts = name.split(".") if name not in SPECIAL else []
    for i in range(len(parts) - (0 if include_self else 1), 0, -1):
        candidate = ".".join(parts[:i])
        if candidate in clusters:
            return clusters[candidate]
    return top


def _close_clusters(clusters: dict[str, Any], top: Any) -> None:
    """Nest each cluster in its parent, deepest first, so children are complete when copied."""
    for name in sorted(clusters, key=lambda n: n.count("."), reverse=True):
        _container(name, clusters, top, include_self=False).subgraph(clusters[name])
