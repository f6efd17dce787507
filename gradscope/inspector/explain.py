"""Costly second passes that say *where* a problem starts; run only for rules that fired.

Each pass replays the forward under a `TorchFunctionMode` that watches every
torch call, and names the op, the module and the user's line:

- none-grad:  the op whose input required grad but whose output does not (a cut);
- non-finite: the first op that turned finite inputs into NaN/Inf, or, if the
  forward stays finite, the backward node anomaly mode catches;
- vanishing:  the saturating activations and their mean derivative;
- zero-grad:  ReLUs whose outputs are all zero;
- exploding:  how fast activations grow from module to module.
"""

from __future__ import annotations

import math
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import torch

with warnings.catch_warnings():  # torch warns here when numpy is not installed
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    from torch.overrides import TorchFunctionMode

from gradscope.errors import (
    UserCodeError,
    calling_user_frame,
    is_user_file,
    short_path,
    user_line,
)
from gradscope.findings import TABLE, Finding
from gradscope.inspector import hooks, preserve
from gradscope.stats import RunStats

_CHECKPOINT = os.path.join("torch", "utils", "checkpoint.py")
MAX_SITES = 3


def in_reentrant_checkpoint() -> str | None:
    """The user's line that called a torch.utils.checkpoint now running its forward, if any."""
    frame: Any = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename.endswith(_CHECKPOINT):
            caller = calling_user_frame(frame)
            return f"{short_path(caller.f_code.co_filename)}:{caller.f_lineno}" if caller else ""
        frame = frame.f_back
    return None


def op_name(func: Any) -> str:
    """A torch function's short name; `data` for the Tensor.data property."""
    name = getattr(func, "__name__", None) or str(func)
    if name == "__get__":  # a property such as Tensor.data
        owner = getattr(func, "__self__", None)
        name = getattr(owner, "__name__", "attribute")
    return name


def _flat_tensors(value: Any) -> list[torch.Tensor]:
    return list(hooks.tensors_in(value))


@contextmanager
def _module_stack(model: torch.nn.Module) -> Iterator[list[str]]:
    """The names of the modules currently inside their forward, innermost last."""
    stack: list[str] = []

    def leave(_name: str, _m: Any, _out: Any) -> None:
        if stack:
            stack.pop()

    with hooks.module_hooks(model, pre=lambda name, _m: stack.append(name), post=leave):
        yield stack


Observe = Callable[[str, list[torch.Tensor], Any, str], None]


class _Watcher(TorchFunctionMode):
    """Calls `observe(name, inputs, output, module)` after every torch function."""

    def __init__(self, observe: Observe, stack: list[str]):
        super().__init__()
        self.observe = observe
        self.stack = stack

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = _flat_tensors((args, kwargs or {}))
        with torch._C.DisableTorchFunction():
            self.observe(op_name(func), inputs, out, self.stack[-1] if self.stack else "")
        return out


def _replay(
    model: torch.nn.Module,
    batch: Any,
    loss_fn: Any,
    grad_outputs: Any,
    observe: Observe,
    post: hooks.PostHook | None = None,
) -> torch.Tensor:
    """The forward and the loss once more, with `observe` watching every torch call; the loss."""
    with (
        preserve.preserved_state(model),
        _module_stack(model) as stack,
        hooks.module_hooks(model, post=post),
        torch.enable_grad(),
        _Watcher(observe, stack),
    ):
        target, _ = hooks.forward_and_loss(model, batch, loss_fn, grad_outputs)
    return target


def _sites(model, batch, loss_fn, grad_outputs, test) -> list[str]:
    """Distinct `op at file:line in module` strings where `test(name, inputs, out)` holds."""
    seen: dict[str, None] = {}

    def observe(name: str, inputs: list[torch.Tensor], out: Any, module: str) -> None:
        if len(seen) < MAX_SITES and test(name, inputs, out):
            seen.setdefault(_site(name, module), None)

    _replay(model, batch, loss_fn, grad_outputs, observe)
    return list(seen)


def _site(name: str, module: str, line: str | None = None) -> str:
    line = line if line is not None else user_line()
    return f"`{name}`" + (f" at {line}" if line else "") + (f" in `{module}`" if module else "")


# --- why a parameter got no gradient --------------------------------------------------------------

CUT_KINDS = {
    "detach": ".detach()",
    "detach_": ".detach_()",
    "data": ".data",
    "item": ".item() (a Python number)",
    "tolist": ".tolist() (Python numbers)",
    "numpy": ".numpy() (a NumPy round-trip)",
    "__float__": "float() (a Python number)",
    "__int__": "int() (a Python number)",
    "requires_grad_": "requires_grad_(False)",
}


SHAPE_ONLY = frozenset(
    ("zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like",
     "randint_like", "new_zeros", "new_ones", "new_empty", "new_full")
)  # fmt: skip
"""Ops that read only their input's shape, dtype and device: no value of it goes on."""


@dataclass
class _Flow:
    """Where the values computed from each gradient-less parameter went in one forward."""

    subjects: dict[int, str]
    taint: dict[int, frozenset[str]] = field(default_factory=dict)
    keep: list[Any] = field(default_factory=list)
    used: set[str] = field(default_factory=set)
    cuts: dict[str, list[str]] = field(default_factory=dict)
    soft_cuts: dict[str, list[str]] = field(default_factory=dict)
    dangling: dict[int, tuple[torch.Tensor, frozenset[str], str]] = field(default_factory=dict)
    returned_by: dict[int, str] = field(default_factory=dict)
    indexed: set[int] = field(default_factory=set)
    """Values of an op that also returned integer indices (`topk`): if they dangle, the
    indices are what went on, and the cut there is the cause."""

    def observe(self, name: str, inputs: list[torch.Tensor], out: Any, module: str) -> None:
        marks: frozenset[str] = frozenset()
        for t in inputs:
            marks |= self.taint.get(id(t), frozenset()) or (
                frozenset([self.subjects[id(t)]]) if id(t) in self.subjects else frozenset()
            )
            self.dangling.pop(id(t), None)
        if not marks:
            return
        self.used |= marks
        live = any(t.requires_grad for t in inputs)
        outs = [t for t in _flat_tensors(out)]
        carried = [t for t in outs if t.requires_grad]
        if name in SHAPE_ONLY or (live and not outs and name not in CUT_KINDS):
            return  # `.shape`, `zeros_like`, `bool(x > 0)`: no values leave, nothing is cut
        if live and not carried:
            self._cut(name, outs, marks, module)
            return
        line = user_line()
        if live and any(not _differentiable(t) for t in outs):
            # `topk`, `max(dim)`, `sort`: values with a gradient, indices without one; a
            # parameter whose values leave only through the indices is cut here
            self._cut(name, [], marks, module, line)
            self.indexed.update(id(t) for t in carried)
        for t in carried:
            self.taint[id(t)] = marks
            self.keep.append(t)
            self.dangling[id(t)] = (t, marks, _site(name, module, line))

    def _cut(
        self,
        name: str,
        outs: list[torch.Tensor],
        marks: frozenset[str],
        module: str,
        line: str | None = None,
    ) -> None:
        checkpoint = in_reentrant_checkpoint() if not torch.is_grad_enabled() else None
        if checkpoint is not None:
            kind = (
                "a reentrant torch.utils.checkpoint"
                + (f" called at {checkpoint}" if checkpoint else "")
                + " whose inputs do not require grad, so it computes without a graph "
                "(use use_reentrant=False, or make an input require grad)"
            )
            soft = False
        elif not torch.is_grad_enabled():
            kind = f"a torch.no_grad() (or inference_mode) region: {_site(name, module)}"
            soft = False
        elif name in CUT_KINDS:
            kind = f"{CUT_KINDS[name]}: {_site(name, module)}"
            soft = False
        elif not outs:  # called for the indices of an op that also returned values
            kind = (
                f"the integer indices of {_site(name, module, line)}, which carry no gradient "
                "(only its values do)"
            )
            soft = True
        elif all(not _differentiable(t) for t in outs):
            kind = f"an integer or boolean op, which has no gradient: {_site(name, module, line)}"
            soft = True
        else:
            kind = f"{_site(name, module)}: its input requires grad, its output does not"
            soft = False
        for subject in marks:
            sites = (self.soft_cuts if soft else self.cuts).setdefault(subject, [])
            if kind not in sites and len(sites) < MAX_SITES:
                sites.append(kind)

    def post(self, name: str, _m: Any, out: Any) -> None:
        for t in _flat_tensors(out):
            if id(t) in self.dangling and name:
                self.returned_by[id(t)] = name  # the outermost module, since post hooks nest

    def unused(self, subject: str) -> list[str]:
        return list(
            dict.fromkeys(
                f"`{self.returned_by[k]}`" if k in self.returned_by else site
                for k, (_, marks, site) in self.dangling.items()
                if subject in marks and k not in self.indexed
            )
        )[:MAX_SITES]


def _differentiable(t: torch.Tensor) -> bool:
    return t.is_floating_point() or t.is_complex()


def graph_causes(model, batch, loss_fn, grad_outputs, subjects: dict[int, str]) -> dict[str, str]:
    """Subject name → why its gradient is None, from one replay that follows its values."""
    flow = _Flow(subjects)
    target = _replay(model, batch, loss_fn, grad_outputs, flow.observe, flow.post)
    flow.dangling.pop(id(target), None)
    out = {}
    for subject in subjects.values():
        if flow.cuts.get(subject):
            out[subject] = "graph cut by " + "; ".join(flow.cuts[subject])
        elif flow.unused(subject):
            out[subject] = (
                "computed but not used by the loss: the output of "
                + ", ".join(flow.unused(subject))
                + " never reaches it (nothing is cut; drop it, add it to the loss, or freeze it)"
            )
        elif flow.soft_cuts.get(subject):
            out[subject] = "graph cut by " + "; ".join(flow.soft_cuts[subject])
        elif subject not in flow.used:
            out[subject] = "the parameter is not used in the forward pass, although its module ran"
        else:
            out[subject] = "gradscope could not confirm where its values leave the graph"
    return out


def _makes_non_finite(name: str, inputs: list[torch.Tensor], out: Any) -> bool:
    outs = [t for t in _flat_tensors(out) if t.is_floating_point()]
    if not outs or not all(bool(torch.isfinite(t).all()) for t in inputs if t.is_floating_point()):
        return False
    return not all(bool(torch.isfinite(t).all()) for t in outs)


_DOMAIN_OPS = (
    "log",
    "sqrt",
    "rsqrt",
    "div",
    "pow",
    "acos",
    "asin",
    "reciprocal",
    "atanh",
    "lgamma",
)


def non_finite_origin(model, batch, loss_fn=None, grad_outputs=None) -> list[str]:
    sites = _sites(model, batch, loss_fn, grad_outputs, _makes_non_finite)[:1]
    if sites:
        return [f"first non-finite value made by {sites[0]} from finite inputs"]
    return _anomaly_origin(model, batch, loss_fn, grad_outputs)


def _anomaly_origin(model, batch, loss_fn, grad_outputs) -> list[str]:
    """The forward stayed finite: let anomaly mode name the backward node that made NaN."""
    with preserve.preserved_state(model), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with torch.autograd.detect_anomaly(check_nan=True), torch.enable_grad():
                target, _ = hooks.forward_and_loss(model, batch, loss_fn, grad_outputs)
                torch.autograd.grad(
                    target,
                    [p for p in model.parameters() if p.requires_grad],
                    grad_outputs,
                    allow_unused=True,
                )
        except RuntimeError as exc:
            node = str(exc).split("'")[1] if "'" in str(exc) else str(exc).splitlines()[0]
            line = _forward_line([str(w.message) for w in caught])
            return [
                f"the forward is finite; backward node {node} returned NaN"
                + (f" (its forward op is at {line})" if line else "")
            ]
        except Exception:
            pass
    return []


def _forward_line(messages: list[str]) -> str | None:
    """The last user frame in anomaly mode's 'Traceback of forward call'."""
    best = None
    for text in messages:
        for line in text.splitlines():
            line = line.strip()
            if line.startswith('File "'):
                path, _, rest = line[6:].partition('", line ')
                if is_user_file(path):
                    best = f"{short_path(path)}:{rest.split(',')[0]}"
    return best


_SATURATING = {"sigmoid": lambda y: y * (1 - y), "tanh": lambda y: 1 - y * y}


def saturation(model, batch, loss_fn=None, grad_outputs=None) -> list[str]:
    """The sigmoid/tanh calls in the loss's own graph (an unused head's tanh does not count)."""
    calls: list[tuple[str, torch.Tensor, Any]] = []

    def observe(name: str, inputs, out: Any, module: str) -> None:
        base = name.rstrip("_")
        if base in _SATURATING and isinstance(out, torch.Tensor) and out.numel():
            calls.append((base, out.detach().float(), out.grad_fn))

    target = _replay(model, batch, loss_fn, grad_outputs, observe)
    in_graph = hooks.graph_nodes(target)
    stats = []
    for base, y, node in calls:
        if node is None or node in in_graph:
            d = _SATURATING[base](y)
            stats.append(
                (base, float(d.mean()), float((d < 0.01 * d.max().clamp(min=1e-30)).float().mean()))
            )
    if not stats:
        return []
    kinds = sorted({c[0] for c in stats})
    mean_d = math.exp(sum(math.log(max(c[1], 1e-30)) for c in stats) / len(stats))
    saturated = sum(c[2] for c in stats) / len(stats)
    return [
        f"{len(stats)} {'/'.join(kinds)} calls on the way; their mean derivative is "
        f"{mean_d:.3g} per call, so the gradient shrinks by about {mean_d ** len(stats):.2g} "
        f"over them ({saturated:.0%} of units saturated)"
    ]


STEPS = ("round", "floor", "ceil", "trunc", "sign", "fix")
"""Ops whose derivative is zero wherever it exists: in the graph, but nothing passes back."""


def dead_units(model, batch, loss_fn=None, grad_outputs=None) -> list[str]:
    def dead(name: str, inputs, out: Any) -> bool:
        return (
            name.rstrip("_") in ("relu", "threshold")
            and isinstance(out, torch.Tensor)
            and out.numel() > 0
            and not bool(out.any())
        )

    def step(name: str, inputs, out: Any) -> bool:
        return (
            name.rstrip("_") in STEPS
            and isinstance(out, torch.Tensor)
            and out.requires_grad
            and any(t.requires_grad for t in inputs)
        )

    found = _sites(model, batch, loss_fn, grad_outputs, lambda *a: dead(*a) or step(*a))
    return [
        f"{s} has a zero derivative everywhere: no gradient passes back through it"
        if s.strip("`").split("`")[0].rstrip("_") in STEPS
        else f"every output of {s} is zero: no gradient passes back through it"
        for s in found
    ]


def activation_growth(model, batch, loss_fn=None, grad_outputs=None) -> list[str]:
    sizes: list[tuple[str, float]] = []

    def record(name: str, _m: Any, out: Any) -> None:
        t = out if isinstance(out, torch.Tensor) else None
        if t is not None and t.is_floating_point() and t.numel():
            sizes.append((name, float(t.detach().float().pow(2).mean().sqrt())))

    leaves = {
        id(m)
        for m in model.modules()
        if not any(m.children()) and any(True for _ in m.parameters(recurse=False))
    }
    with hooks.module_hooks(model, post=record, only=lambda m: id(m) in leaves):
        _replay(model, batch, loss_fn, grad_outputs, lambda *a: None)
    if len(sizes) < 2 or sizes[0][1] == 0:
        return []
    (first, a), (last, b) = sizes[0], sizes[-1]
    factor = (b / a) ** (1 / (len(sizes) - 1)) if a and b else float("nan")
    return [
        f"activation RMS goes from {a:.3g} at `{first}` to {b:.3g} at `{last}` "
        f"(x{factor:.3g} per layer over {len(sizes)} layers with parameters)"
    ]


PASSES: dict[str, Callable[..., list[str]]] = {
    "non-finite-loss": non_finite_origin,
    "non-finite-grad": non_finite_origin,
    "vanishing": saturation,
    "zero-grad": dead_units,
    "exploding": activation_growth,
}


def enrich(
    findings: list[Finding], stats: RunStats, model, batch, loss_fn=None, grad_outputs=None
) -> list[Finding]:
    """Attach evidence from each needed pass (each run at most once) to its findings."""
    ran = {m.name for m in stats.modules if m.ran}
    cache: dict[str, list[str]] = {}
    causes = _none_grad_causes(findings, ran, model, batch, loss_fn, grad_outputs)
    out = []
    for f in findings:
        if f.slug == "none-grad" and f.subject in causes:
            out.append(replace(f, evidence=(*f.evidence, causes[f.subject])))
            continue
        pass_ = PASSES.get(f.slug)
        if pass_ is None:
            out.append(f)
            continue
        key = pass_.__name__
        if key not in cache:
            cache[key] = _evidence(pass_, model, batch, loss_fn, grad_outputs)
        f = replace(f, evidence=f.evidence + tuple(cache[key])) if cache[key] else f
        out.append(fit_row(f))
    return out


def _evidence(pass_: Callable[..., list[str]], *args: Any) -> list[str]:
    try:
        return pass_(*args)
    except Exception as exc:  # the finding stands; say why it has no location
        return [_could_not(exc)]


def _could_not(exc: Exception) -> str:
    original = exc.original if isinstance(exc, UserCodeError) else exc
    return (
        f"could not locate it: replaying the forward raised {type(original).__name__}: {original}"
    )


def _none_grad_causes(findings, ran, model, batch, loss_fn, grad_outputs) -> dict[str, str]:
    wanted = {f.subject for f in findings if f.slug == "none-grad" and _module_of(f.subject) in ran}
    if not wanted:
        return {}
    subjects = {id(p): n for n, p in model.named_parameters() if n in wanted}
    try:
        return graph_causes(model, batch, loss_fn, grad_outputs, subjects)
    except Exception as exc:
        return dict.fromkeys(wanted, _could_not(exc))


def fit_row(f: Finding) -> Finding:
    """The table row that fits the cause found: a NaN from log/sqrt of a bad value is a domain
    error, not a learning rate too high; one from an overflow is an explosion."""
    if f.slug not in ("non-finite-loss", "non-finite-grad") or not f.evidence:
        return f
    text = " ".join(f.evidence).lower()
    if "could not locate" in text:
        return f
    domain = any(f"`{op}" in text or f"{op}backward" in text for op in _DOMAIN_OPS)
    return replace(f, row=TABLE["domain"] if domain else TABLE["exploding"])


def _module_of(param_name: str) -> str:
    return param_name.rpartition(".")[0]


_EVIDENCE_KEYS = {"non-finite-loss": "non-finite", "non-finite-grad": "non-finite"}


def attach_evidence(findings: list[Finding], evidence: dict[str, list[str]]) -> list[Finding]:
    """Sentences a live watch of a script's step found (keyed "non-finite" or
    "none-grad:NAME"), added to the findings they explain, with the troubleshooting row
    that fits the op found, as the explanation passes choose it."""
    out = []
    for f in findings:
        key = f"none-grad:{f.subject}" if f.slug == "none-grad" else _EVIDENCE_KEYS.get(f.slug, "")
        extra = evidence.get(key, [])
        if extra:
            f = fit_row(replace(f, evidence=(*f.evidence, *extra)))
        out.append(f)
    return out
