"""Costly second passes that say *where* a problem starts; run only for rules that fired.

Each pass replays the forward under a `TorchFunctionMode` that watches every
torch call, and names the op, the module and the user's line:

- none-grad:  the op whose input required grad but whose output does not (a cut);
- non-finite: the first op that turned finite inputs into NaN/Inf, or, if the
  forward stays finite, the backward node anomaly mode catches;
- vanishing:  the saturating activations and their mean derivative;
- zero-grad:  ReLUs whose outputs are all zero;
- exploding:  how fast activations grow from module to module.

The replay itself is gradscope.inspector.replay; the none-grad pass, explain_cuts.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch

from gradscope.errors import UserCodeError, is_user_file, short_path
from gradscope.findings import Finding
from gradscope.inspector import hooks, infinite_fills, preserve
from gradscope.inspector.backward_nan import backward_origin
from gradscope.inspector.explain_cuts import graph_causes
from gradscope.inspector.infinite_fills import InfiniteFills
from gradscope.inspector.replay import CALL, flat_tensors, op_sites, replay, site
from gradscope.inspector.uninitialised import Unwritten
from gradscope.rules import frozen_by_no_grad
from gradscope.rules.grads import cut_found
from gradscope.stats import RunStats
from gradscope.troubleshooting import TABLE
from gradscope.watcher import kl_inputs, loss_inputs, renormalised, soft_target_values


class _NonFiniteMaker:
    """The test of an op that made NaN/Inf from finite inputs; memory an uninitialising op
    left (`torch.empty`) is judged only where it is read or written whole. What a mask's
    -inf reached is judged by NaN alone (infinite_fills.py): `masked`, the first op found
    made NaN of it."""

    def __init__(self) -> None:
        self.unwritten = Unwritten()
        self.fills = InfiniteFills()
        self.masked: bool | None = None

    def __call__(self, name: str, inputs: list[torch.Tensor], out: Any) -> bool:
        outs = [t for t in flat_tensors(out) if t.is_floating_point()]
        call = CALL.get()
        masked = self.fills.note(name, call, (inputs, outs))
        if masked:
            self.fills.filled_at(site(name, ""), call)
        read = self.unwritten.screen(name, inputs, outs, name) if outs else None
        if read is None or any(bool(infinite_fills.came_bad(t, masked)) for t in _floats(read)):
            return False
        made = any(bool(infinite_fills.made(t, _floats(read), masked)) for t in outs)
        if made and self.masked is None:
            self.masked = bool(masked) and bool(infinite_fills.of_mask(outs, _floats(read), masked))
        return made


def _floats(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    return [t for t in tensors if t.is_floating_point()]


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
    made = backward_origin(model, batch, loss_fn, grad_outputs)  # a finite loss only
    if made:  # before the forward's: a -inf that torch.where then dropped is not the cause
        return made
    maker = _NonFiniteMaker()
    sites = op_sites(model, batch, loss_fn, grad_outputs, maker)[:1]
    if sites and maker.masked:
        op = sites[0].split("`")[1]
        return [infinite_fills.made_nan(op, sites[0], maker.fills.first)]
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

    target = replay(model, batch, loss_fn, grad_outputs, observe)
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

    found = op_sites(model, batch, loss_fn, grad_outputs, lambda *a: dead(*a) or step(*a))
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
        replay(model, batch, loss_fn, grad_outputs, lambda *a: None)
    if len(sizes) < 2 or sizes[0][1] == 0:
        return []
    (first, a), (last, b) = sizes[0], sizes[-1]
    factor = (b / a) ** (1 / (len(sizes) - 1)) if a and b else float("nan")
    return [
        f"activation RMS goes from {a:.3g} at `{first}` to {b:.3g} at `{last}` "
        f"(x{factor:.3g} per layer over {len(sizes)} layers with parameters)"
    ]


_SQUASHING = ("softmax", "log_softmax", "sigmoid")


def probability_ops(model, batch, loss_fn=None, grad_outputs=None) -> list[str]:
    """The user's line of the softmax or sigmoid that fed the loss (its node, found again
    in the replay's graph)."""
    sites: list[tuple[Any, str]] = []  # the node kept, so that its identity holds

    def observe(name: str, inputs, out: Any, module: str) -> None:
        if name.rstrip("_") in _SQUASHING and isinstance(out, torch.Tensor) and out.grad_fn:
            sites.append((out.grad_fn, site(name, module)))

    target = replay(model, batch, loss_fn, grad_outputs, observe)
    found = loss_inputs.find(target.grad_fn) if target.grad_fn is not None else []
    again = renormalised.find(target.grad_fn) or kl_inputs.find(target.grad_fn)
    again = again or soft_target_values.find(target.grad_fn)
    found += [again] if again is not None else []
    return [f"{m.what} made by {where}" for m in found for node, where in sites if node is m.node]


PASSES: dict[str, Callable[..., list[str]]] = {
    "loss-fed-probs": probability_ops,
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
            out.append(_with_cause(f, causes[f.subject], _module_of(f.subject) in ran))
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


def _with_cause(f: Finding, cause: str, ran: bool) -> Finding:
    """A none-grad finding with the explanation pass's cause. For a parameter whose module
    never ran while its parent did (attention's out_proj, which the parent's forward reads
    directly), only a parent that ran inside torch.no_grad() changes it: frozen by the
    block; else it stays "never ran"."""
    if ran:
        return cut_found(replace(f, evidence=(*f.evidence, cause)))
    if frozen_by_no_grad.read_inside(f.subject, [cause]):
        return cut_found(replace(f, evidence=(*f.evidence, cause)))
    return f


def _none_grad_causes(findings, ran, model, batch, loss_fn, grad_outputs) -> dict[str, str]:
    wanted = {
        f.subject
        for f in findings
        if f.slug == "none-grad"
        and (_module_of(f.subject) in ran or _module_of(_module_of(f.subject)) in ran)
    }
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
    if f.slug == "none-grad":
        return cut_found(f)
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
