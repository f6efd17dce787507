"""`clip_grad_norm_` (in torch.nn.utils and torch.nn.utils.clip_grad: replaced in both
before the script imports them), `get_total_norm` and `clip_grads_with_norm_`: what a
clip tells the step (clipping.py).
Inside a graph torch.compile traces, torch's own clip runs as it is (a `fullgraph=True`
region allows no break): only its total and max_norm reach the step, as a value the
graph returns (state.traced_clip, taken by the next step: clipping.traced)."""

from __future__ import annotations

import types
from typing import Any

import torch
from torch.compiler import is_compiling

from gradscope.watcher import clip_reuse, clipping
from gradscope.watcher.guard import enter, safely
from gradscope.watcher.patches.base import Patch


def _listed(parameters: Any) -> list[torch.Tensor]:
    return [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)


def _as_given(parameters: Any, params: list[torch.Tensor]) -> Any:
    """The listed parameters as torch is to see them: a generator stays one (torch warns
    when it is empty)."""
    return (p for p in params) if isinstance(parameters, types.GeneratorType) else params


CLIP = "the clip_grad_norm_() hook"


class ClipGradNorm(Patch):
    name = "clip_grad_norm_"
    traced = True  # fullgraph=True compiles it whole: a break there would stop the script

    def wrap(self, original: Any) -> Any:
        state = self.state
        reusable = clip_reuse.is_torchs(original)

        def clip_grad_norm_(
            parameters: Any, max_norm: float, norm_type: float = 2.0, *a: Any, **kw: Any
        ) -> Any:
            if is_compiling():  # torch's clip in the graph; its total kept for the step
                total = original(parameters, max_norm, norm_type, *a, **kw)
                state.traced_clip = (total, norm_type, max_norm)
                return total
            here = enter(state)
            if here is None or here.depth or here.quiet:
                return original(parameters, max_norm, norm_type, *a, **kw)
            params = _listed(parameters)
            scale = safely(state, here, CLIP, lambda: clipping.before_clip(state, here, params))
            known = None  # torch's total from the norms just taken (clip_reuse.py)
            if reusable and scale is None and not a and not kw:
                known = safely(
                    state,
                    here,
                    CLIP,
                    lambda: clip_reuse.total(state, params, here.pre_clip, norm_type),
                )
            here.depth += 1
            try:
                if known is not None:
                    total = clip_reuse.clip(params, max_norm, known)
                else:
                    total = original(_as_given(parameters, params), max_norm, norm_type, *a, **kw)
            finally:
                here.depth -= 1
            safely(
                state,
                here,
                CLIP,
                lambda: clipping.clipped(here, total, float(norm_type), float(max_norm), scale),
            )
            return total

        return clip_grad_norm_


class TotalNorm(Patch):
    name = "get_total_norm"
    traced = True

    def wrap(self, original: Any) -> Any:
        state = self.state

        def get_total_norm(tensors: Any, norm_type: float = 2.0, *a: Any, **kw: Any) -> Any:
            if is_compiling():  # the total for the step when a clip with it follows
                total = original(tensors, norm_type, *a, **kw)
                state.traced_clip = (total, norm_type, None)
                return total
            here = enter(state)
            if here is None or here.depth or here.quiet:
                return original(tensors, norm_type, *a, **kw)
            tensors = _listed(tensors)
            total = original(tensors, norm_type, *a, **kw)
            safely(
                state,
                here,
                "the get_total_norm() hook",
                lambda: clipping.total_norm(state, here, tensors, total, float(norm_type)),
            )
            return total

        return get_total_norm


class ClipWithNorm(Patch):
    name = "clip_grads_with_norm_"
    traced = True

    def wrap(self, original: Any) -> Any:
        state = self.state

        def clip_grads_with_norm_(
            parameters: Any, max_norm: float, total_norm: Any, *a: Any, **kw: Any
        ) -> Any:
            if is_compiling():
                state.traced_clip = (total_norm, 2.0, max_norm)
                return original(parameters, max_norm, total_norm, *a, **kw)
            here = enter(state)
            if here is not None and here.depth == 0 and not here.quiet:
                params = _listed(parameters)
                safely(
                    state,
                    here,
                    "the clip_grads_with_norm_() hook",
                    lambda: clipping.given_norm(state, here, params, max_norm, total_norm),
                )
                parameters = params
            return original(parameters, max_norm, total_norm, *a, **kw)

        return clip_grads_with_norm_
