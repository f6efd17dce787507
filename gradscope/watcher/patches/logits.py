"""`scaled_dot_product_attention`, `softmax` and `cross_entropy` of torch.nn.functional:
on a sampled step (logit_probe.py), the logits they were given, measured on the device.
Any other step only calls what they wrap; a failure switches the probe off, never the
watch. Inside a region torch.compile traces they only call what they wrap: reading the
step there would guard the graph on it, a recompilation every step."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch.nn.functional as F
from torch.compiler import is_compiling

from gradscope.watcher import logit_probe
from gradscope.watcher.patches.base import Patch
from gradscope.watcher.state import WatchState

PART = "the logits probe"


class _Sampled(Patch):
    """Calls `measure(step, args, kw)` before the original on a sampled step."""

    def __init__(self, state: WatchState) -> None:
        super().__init__(state, F)

    def measure(self, step: int, args: tuple[Any, ...], kw: dict[str, Any]) -> None:
        raise NotImplementedError

    def wrap(self, original: Callable[..., Any]) -> Any:
        state, measure = self.state, self.measure

        every = logit_probe.SAMPLE_EVERY

        def sampled(*args: Any, **kw: Any) -> Any:
            if is_compiling():  # traced once by torch.compile: no guard on the step
                return original(*args, **kw)
            step = state.steps + 1
            if step % every:  # most calls: nothing but the check
                return original(*args, **kw)
            if logit_probe.sampled(step) and not state.off and not state.logits.off:
                try:
                    measure(step, args, kw)
                except Exception as exc:
                    state.logits.off = True
                    state.failed(PART, exc, whole=False)
            return original(*args, **kw)

        return sampled


def _arg(args: tuple[Any, ...], kw: dict[str, Any], at: int, name: str, default: Any) -> Any:
    return args[at] if len(args) > at else kw.get(name, default)


class Attention(_Sampled):
    name = "scaled_dot_product_attention"

    def measure(self, step: int, args: tuple[Any, ...], kw: dict[str, Any]) -> None:
        q, k = _arg(args, kw, 0, "query", None), _arg(args, kw, 1, "key", None)
        causal = bool(_arg(args, kw, 5, "is_causal", False))
        scale = _arg(args, kw, 6, "scale", None)
        self.state.logits.attend(step, q, k, scale, causal, self.state.tracked.roots)


class Softmax(_Sampled):
    name = "softmax"

    def measure(self, step: int, args: tuple[Any, ...], kw: dict[str, Any]) -> None:
        scores, dim = _arg(args, kw, 0, "input", None), _arg(args, kw, 1, "dim", None)
        self.state.logits.scores(step, scores, dim, self.state.tracked.roots)


class CrossEntropy(_Sampled):
    name = "cross_entropy"

    def measure(self, step: int, args: tuple[Any, ...], kw: dict[str, Any]) -> None:
        self.state.logits.cross_entropy(step, _arg(args, kw, 0, "input", None))
