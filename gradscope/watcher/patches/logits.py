"""`scaled_dot_product_attention`, `softmax` and `cross_entropy` of torch.nn.functional,
`torch.softmax`, the tensor methods `softmax` and `log_softmax` (F.softmax and
F.log_softmax call them) and `nll_loss`: on a sampled step (logit_probe.py), the logits
they were given, measured on the device (a log_softmax's input where its output reaches
nll_loss: a cross-entropy in two calls).
Any other step only calls what they wrap; a failure switches the probe off, never the
watch. Inside a region torch.compile traces they only call what they wrap: reading the
step there would guard the graph on it, a recompilation every step."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch.compiler import is_compiling

from gradscope.watcher import future_attention, logit_probe
from gradscope.watcher.own_ops import outside_modes
from gradscope.watcher.patches.base import Patch
from gradscope.watcher.state import WatchState

PART = "the logits probe"


class _Sampled(Patch):
    """Calls `measure(step, args, kw)` before the original on a sampled step."""

    traced = True

    def __init__(self, state: WatchState, owner: Any = F) -> None:
        super().__init__(state, owner)

    def measure(self, step: int, args: tuple[Any, ...], kw: dict[str, Any]) -> None:
        raise NotImplementedError

    def early(self, step: int, args: tuple[Any, ...], kw: dict[str, Any]) -> None:
        """At the first steps (future_attention.STEPS): what the call attends to."""

    def wrap(self, original: Callable[..., Any]) -> Any:
        state, measure, early = self.state, self.measure, self.early

        every, first = logit_probe.SAMPLE_EVERY, future_attention.STEPS

        def sampled(*args: Any, **kw: Any) -> Any:
            if is_compiling():  # traced once by torch.compile: no guard on the step
                return original(*args, **kw)
            step = state.steps + 1
            if step % every and step > first:  # most calls: nothing but the check
                return original(*args, **kw)
            if step <= first and not state.off and state.future.wants(step):
                try:
                    with outside_modes():
                        early(step, args, kw)
                except Exception as exc:
                    state.future.off = True
                    state.failed(future_attention.PART, exc, whole=False)
            if logit_probe.sampled(step) and not state.off and not state.logits.off:
                try:
                    with outside_modes():
                        measure(step, args, kw)
                except Exception as exc:
                    state.logits.off = True
                    state.failed(PART, exc, whole=False)
            return original(*args, **kw)

        return sampled


class _Method(Patch):
    """A patch of a tensor method, which torch.Tensor inherits from its C base: shadowed on
    torch.Tensor while installed, the shadow deleted on removal."""

    def install(self) -> None:
        original = getattr(self.owner, self.name, None)
        if original is None or self.name in vars(self.owner):
            return
        self.original = original
        setattr(self.owner, self.name, self.wrap(original))

    def remove(self) -> None:
        if self.original is not None:
            delattr(self.owner, self.name)
            self.original = None


class BoundNames:
    """Where a module bound one of F's patched functions to a name before the watch
    (`from torch.nn.functional import scaled_dot_product_attention as sdpa` in a library
    imported first), that name bound to the patch too, and given back on removal: one
    scan of the loaded modules (torch's and gradscope's aside), when installed after the
    patches."""

    def __init__(self, patches: list[_Sampled]) -> None:
        self.patches = patches
        self.bound: list[tuple[dict[str, Any], str, Any, Any]] = []

    def install(self) -> None:
        wrappers = {
            id(p.original): (p.original, vars(F)[p.name])
            for p in self.patches
            if p.owner is F and p.original is not None
        }
        ids = wrappers.keys()
        for module_name, module in list(sys.modules.items()):
            names = getattr(module, "__dict__", None)
            if module_name.partition(".")[0] in ("torch", "gradscope"):
                continue
            if not isinstance(names, dict) or ids.isdisjoint(map(id, tuple(names.values()))):
                continue  # most modules bind none: checked in C, not name by name
            for key, value in list(names.items()):
                if id(value) in wrappers and value is wrappers[id(value)][0]:
                    names[key] = wrappers[id(value)][1]
                    self.bound.append((names, key, value, names[key]))

    def remove(self) -> None:
        for names, key, original, wrapper in self.bound:
            if names.get(key) is wrapper:
                names[key] = original
        self.bound = []


def _arg(args: tuple[Any, ...], kw: dict[str, Any], at: int, name: str, default: Any) -> Any:
    return args[at] if len(args) > at else kw.get(name, default)


class Attention(_Sampled):
    name = "scaled_dot_product_attention"

    def measure(self, step: int, args: tuple[Any, ...], kw: dict[str, Any]) -> None:
        q, k = _arg(args, kw, 0, "query", None), _arg(args, kw, 1, "key", None)
        causal = bool(_arg(args, kw, 5, "is_causal", False))
        scale = _arg(args, kw, 6, "scale", None)
        self.state.logits.attend(step, q, k, scale, causal, self.state.tracked.roots)

    def early(self, step: int, args: tuple[Any, ...], kw: dict[str, Any]) -> None:
        q, k = _arg(args, kw, 0, "query", None), _arg(args, kw, 1, "key", None)
        mask = _arg(args, kw, 3, "attn_mask", None)
        causal = bool(_arg(args, kw, 5, "is_causal", False))
        scale = _arg(args, kw, 6, "scale", None)
        self.state.future.attend(step, q, k, mask, causal, scale)


class Softmax(_Sampled):
    name = "softmax"

    def measure(self, step: int, args: tuple[Any, ...], kw: dict[str, Any]) -> None:
        scores, dim = _arg(args, kw, 0, "input", None), _arg(args, kw, 1, "dim", None)
        self.state.logit_tables.note(scores)
        self.state.logits.scores(step, scores, dim, self.state.tracked.roots)

    def early(self, step: int, args: tuple[Any, ...], kw: dict[str, Any]) -> None:
        scores, dim = _arg(args, kw, 0, "input", None), _arg(args, kw, 1, "dim", None)
        if isinstance(scores, torch.Tensor) and scores.dim() in (3, 4) and scores.requires_grad:
            self.state.future.scores(step, scores, dim)


class TorchSoftmax(Softmax):
    """`torch.softmax(scores, -1)`."""

    def __init__(self, state: WatchState) -> None:
        super().__init__(state, torch)


class TensorSoftmax(_Method, Softmax):
    """`scores.softmax(-1)` (F.softmax calls it too: the step's second call is not read)."""

    def __init__(self, state: WatchState) -> None:
        super().__init__(state, torch.Tensor)


class TensorLogSoftmax(_Method, _Sampled):
    """`logits.log_softmax(-1)`, and F.log_softmax through it: its input and output kept
    for the step's nll_loss."""

    name = "log_softmax"

    def __init__(self, state: WatchState) -> None:
        super().__init__(state, torch.Tensor)

    def measure(self, step: int, args: tuple[Any, ...], kw: dict[str, Any]) -> None:
        raise NotImplementedError  # wrap reads the output too

    def wrap(self, original: Callable[..., Any]) -> Any:
        state, every = self.state, logit_probe.SAMPLE_EVERY

        def log_softmax(*args: Any, **kw: Any) -> Any:
            out = original(*args, **kw)
            if is_compiling() or (state.steps + 1) % every:
                return out
            step = state.steps + 1
            if logit_probe.sampled(step) and not state.off and not state.logits.off:
                dim = _arg(args, kw, 1, "dim", None)
                with outside_modes():
                    state.logits.log_softmax(step, args[0] if args else None, out, dim)
            return out

        return log_softmax


class NllLoss(_Sampled):
    name = "nll_loss"

    def measure(self, step: int, args: tuple[Any, ...], kw: dict[str, Any]) -> None:
        logprobs = _arg(args, kw, 0, "input", None)
        self.state.logits.nll_loss(step, logprobs, self.state.tracked.roots)


class CrossEntropy(_Sampled):
    name = "cross_entropy"

    def measure(self, step: int, args: tuple[Any, ...], kw: dict[str, Any]) -> None:
        logits = _arg(args, kw, 0, "input", None)
        self.state.logits.cross_entropy(step, logits, self.state.tracked.roots)
