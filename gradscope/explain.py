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
from dataclasses import replace
from typing import Any

import torch

with warnings.catch_warnings():  # torch warns here when numpy is not installed
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    from torch.overrides import TorchFunctionMode

from gradscope import probe
from gradscope.errors import _is_library, _is_ours, _relpath
from gradscope.findings import Finding
from gradscope.stats import RunStats

_STDLIB = os.path.dirname(os.__file__)
MAX_SITES = 3


def user_line() -> str | None:
    """`file:line` of the user's code that made the current torch call.

    None when the call came from library code that gradscope itself invoked
    (an nn.ReLU inside nn.Sequential has no line of the user's to point at).
    """
    frame = sys._getframe(1)
    while frame is not None and _is_ours(frame.f_code.co_filename):
        frame = frame.f_back  # this module's own frames
    while frame is not None:
        name = frame.f_code.co_filename
        if _is_ours(name):
            return None
        if not _is_library(name) and not name.startswith(_STDLIB):
            return f"{_relpath(name)}:{frame.f_lineno}"
        frame = frame.f_back
    return None


def _name(func: Any) -> str:
    name = getattr(func, "__name__", None) or str(func)
    if name == "__get__":  # a property such as Tensor.data
        owner = getattr(func, "__self__", None)
        name = getattr(owner, "__name__", "attribute")
    return name


def _flat_tensors(value: Any) -> list[torch.Tensor]:
    return list(probe._tensors(value))


@contextmanager
def _module_stack(model: torch.nn.Module) -> Iterator[list[str]]:
    """The names of the modules currently inside their forward, innermost last."""
    stack: list[str] = []

    def enter(name: str) -> Callable[..., None]:
        def hook(*_: Any) -> None:
            stack.append(name)

        return hook

    def leave(*_: Any) -> None:  # must return None: a value would replace the output
        if stack:
            stack.pop()

    handles = []
    for name, m in model.named_modules():
        handles.append(m.register_forward_pre_hook(enter(name)))
        handles.append(m.register_forward_hook(leave))
    try:
        yield stack
    finally:
        for h in handles:
            h.remove()


class _Watcher(TorchFunctionMode):
    """Calls `observe(name, inputs, output, module)` after every torch function."""

    def __init__(
        self, observe: Callable[[str, list[torch.Tensor], Any, str], None], stack: list[str]
    ):
        super().__init__()
        self.observe = observe
        self.stack = stack

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = _flat_tensors((args, kwargs or {}))
        with torch._C.DisableTorchFunction():
            self.observe(_name(func), inputs, out, self.stack[-1] if self.stack else "")
        return out


def _replay(
    model: torch.nn.Module,
    batch: Any,
    loss_fn: Any,
    grad_outputs: Any,
    observe: Callable[[str, list[torch.Tensor], Any, str], None],
) -> None:
    """The forward and the loss once more, with `observe` watching every torch call."""
    with probe.preserved_state(model), _module_stack(model) as stack, torch.enable_grad():
        with _Watcher(observe, stack):
            output = probe.call_model(model, batch)
            probe._backward_target(output, loss_fn, grad_outputs)


def _sites(model, batch, loss_fn, grad_outputs, test) -> list[str]:
    """Distinct `op at file:line in module` strings where `test(name, inputs, out)` holds."""
    seen: dict[str, None] = {}

    def observe(name: str, inputs: list[torch.Tensor], out: Any, module: str) -> None:
        if len(seen) < MAX_SITES and test(name, inputs, out):
            line = user_line()
            where = (f" at {line}" if line else "") + (f" in `{module}`" if module else "")
            seen.setdefault(f"`{name}`{where}", None)

    _replay(model, batch, loss_fn, grad_outputs, observe)
    return list(seen)


def _is_cut(name: str, inputs: list[torch.Tensor], out: Any) -> bool:
    if not any(t.requires_grad for t in inputs):
        return False
    if name in ("numpy", "item", "tolist"):
        return True
    return isinstance(out, torch.Tensor) and out.is_floating_point() and not out.requires_grad


def _makes_non_finite(name: str, inputs: list[torch.Tensor], out: Any) -> bool:
    outs = [t for t in _flat_tensors(out) if t.is_floating_point()]
    if not outs or not all(bool(torch.isfinite(t).all()) for t in inputs if t.is_floating_point()):
        return False
    return not all(bool(torch.isfinite(t).all()) for t in outs)


def graph_cuts(model, batch, loss_fn=None, grad_outputs=None) -> list[str]:
    return [
        f"graph cut by {s}: its input requires grad, its output does not"
        for s in _sites(model, batch, loss_fn, grad_outputs, _is_cut)
    ]


def non_finite_origin(model, batch, loss_fn=None, grad_outputs=None) -> list[str]:
    sites = _sites(model, batch, loss_fn, grad_outputs, _makes_non_finite)[:1]
    if sites:
        return [f"first non-finite value made by {sites[0]} from finite inputs"]
    return _anomaly_origin(model, batch, loss_fn, grad_outputs)


def _anomaly_origin(model, batch, loss_fn, grad_outputs) -> list[str]:
    """The forward stayed finite: let anomaly mode name the backward node that made NaN."""
    with probe.preserved_state(model), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with torch.autograd.detect_anomaly(check_nan=True), torch.enable_grad():
                output = probe.call_model(model, batch)
                target, _ = probe._backward_target(output, loss_fn, grad_outputs)
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
                if not _is_library(path) and not path.startswith(_STDLIB):
                    best = f"{_relpath(path)}:{rest.split(',')[0]}"
    return best


_SATURATING = {"sigmoid": lambda y: y * (1 - y), "tanh": lambda y: 1 - y * y}


def saturation(model, batch, loss_fn=None, grad_outputs=None) -> list[str]:
    calls: list[tuple[str, float, float]] = []

    def observe(name: str, inputs, out: Any, module: str) -> None:
        base = name.rstrip("_")
        if base in _SATURATING and isinstance(out, torch.Tensor) and out.numel():
            d = _SATURATING[base](out.detach().float())
            calls.append(
                (base, float(d.mean()), float((d < 0.01 * d.max().clamp(min=1e-30)).float().mean()))
            )

    _replay(model, batch, loss_fn, grad_outputs, observe)
    if not calls:
        return []
    kinds = sorted({c[0] for c in calls})
    mean_d = math.exp(sum(math.log(max(c[1], 1e-30)) for c in calls) / len(calls))
    saturated = sum(c[2] for c in calls) / len(calls)
    return [
        f"{len(calls)} {'/'.join(kinds)} calls on the way; their mean derivative is "
        f"{mean_d:.3g} per call, so the gradient shrinks by about {mean_d ** len(calls):.2g} "
        f"over them ({saturated:.0%} of units saturated)"
    ]


def dead_units(model, batch, loss_fn=None, grad_outputs=None) -> list[str]:
    def test(name: str, inputs, out: Any) -> bool:
        return (
            name.rstrip("_") in ("relu", "threshold")
            and isinstance(out, torch.Tensor)
            and out.numel() > 0
            and not bool(out.any())
        )

    return [
        f"every output of {s} is zero: no gradient passes back through it"
        for s in _sites(model, batch, loss_fn, grad_outputs, test)
    ]


def activation_growth(model, batch, loss_fn=None, grad_outputs=None) -> list[str]:
    sizes: list[tuple[str, float]] = []

    def hook(name: str):
        def record(_m, _i, out):
            t = out if isinstance(out, torch.Tensor) else None
            if t is not None and t.is_floating_point() and t.numel():
                sizes.append((name, float(t.detach().float().pow(2).mean().sqrt())))

        return record

    leaves = [
        (n, m)
        for n, m in model.named_modules()
        if not any(m.children()) and any(True for _ in m.parameters(recurse=False))
    ]
    handles = [m.register_forward_hook(hook(n)) for n, m in leaves]
    try:
        _replay(model, batch, loss_fn, grad_outputs, lambda *a: None)
    finally:
        for h in handles:
            h.remove()
    if len(sizes) < 2 or sizes[0][1] == 0:
        return []
    (first, a), (last, b) = sizes[0], sizes[-1]
    factor = (b / a) ** (1 / (len(sizes) - 1)) if a and b else float("nan")
    return [
        f"activation RMS goes from {a:.3g} at `{first}` to {b:.3g} at `{last}` "
        f"(x{factor:.3g} per layer over {len(sizes)} layers with parameters)"
    ]


PASSES: dict[str, Callable[..., list[str]]] = {
    "none-grad": graph_cuts,
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
    out = []
    for f in findings:
        pass_ = PASSES.get(f.slug)
        if pass_ is None or (f.slug == "none-grad" and _module_of(f.subject) not in ran):
            out.append(f)
            continue
        key = pass_.__name__
        if key not in cache:
            try:
                cache[key] = pass_(model, batch, loss_fn, grad_outputs)
            except Exception as exc:  # the finding stands; say why it has no location
                cache[key] = [
                    f"could not locate it: replaying the forward raised {type(exc).__name__}: {exc}"
                ]
        out.append(replace(f, evidence=f.evidence + tuple(cache[key])) if cache[key] else f)
    return out


def _module_of(param_name: str) -> str:
    return param_name.rpartition(".")[0]
