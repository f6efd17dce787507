"""What a clip of the gradients tells a step: the norms before clipping, the script's
own total in its norm type, and max_norm. A clip of gradients still multiplied by
GradScaler's scale (the backward was on `scaler.scale(loss)` and `scaler.unscale_` has
not run since) is marked `scaled_clip`, and its norms are divided by the scale (a device
tensor) so that every number is unscaled. The clip belongs to the optimizers that step
the parameters it touched (stepping.clip_is_for)."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.amp.grad_scaler import OptState

from gradscope.errors import user_line
from gradscope.steps.records import UnusedClip
from gradscope.watcher import discover
from gradscope.watcher.state import WatchState
from gradscope.watcher.threads import ThreadState


def before_clip(
    state: WatchState, here: ThreadState, params: list[torch.Tensor]
) -> torch.Tensor | None:
    """The norms before the clip changes them; the loss scale they still carry."""
    ensure_discovered(state, params)
    here.clip_params = frozenset(id(p) for p in params) or None  # none: not known
    scale = clip_scale(state, here, params)
    index = state.tracked.index
    mine = (index[id(p)] for p in params if id(p) in index)
    here.pre_clip = unscaled(state.measure.grads(state.foreign(here, mine=mine)), scale)
    return scale


def ensure_discovered(state: WatchState, params: list[torch.Tensor]) -> None:
    """The optimizers that own the parameters being clipped, before the first step and
    at a later clip of a parameter no scan has tracked yet (a GAN's discriminator that
    Lightning's toggle_optimizer froze through the generator's backward): its norms
    are measured at the clip, before its optimizer's first step could track it."""
    index = state.tracked.index
    if state.discovered and all(id(p) in index for p in params):
        return
    state.discovered = True
    ids = {id(p) for p in params}
    owners = [
        o
        for o in discover.live_optimizers()
        if any(id(p) in ids for g in o.param_groups for p in g["params"])
    ]
    state.known.extend(o for o in owners if all(o is not k for k in state.known))
    if not discover.covered(state.tracked, owners, params):
        discover.extend(state.tracked, state.known, params)


def total_norm(
    state: WatchState, here: ThreadState, tensors: list[torch.Tensor], total: Any, norm_type: float
) -> None:
    """`get_total_norm` returned `total` for the gradients `tensors`."""
    ids = {id(t) for t in tensors}
    stepped_here = (o for o in state.optimizers if here.ident in state.of(o).stepped_by)
    foreign = state.foreign(here, mine=(i for o in stepped_here for i in state.members(o)))
    params = [
        p for i, p in enumerate(state.tracked.params) if i not in foreign and id(p.grad) in ids
    ]
    here.clip_params = frozenset(id(p) for p in params) or None  # none: not known
    clipped(here, total, norm_type, None, clip_scale(state, here, params))


def given_norm(
    state: WatchState,
    here: ThreadState,
    params: list[torch.Tensor],
    max_norm: float,
    total: Any,
) -> None:
    """`clip_grads_with_norm_` clips `params` to `max_norm` given their total."""
    scale = before_clip(state, here, params)
    if here.clip_total is None:  # no get_total_norm seen: the given total
        clipped(here, total, 2.0, float(max_norm), scale)
    here.max_norm = float(max_norm)
    here.clip_site, here.clip_taken = user_line(), here.current is not None


def clipped(
    here: ThreadState,
    total: Any,
    norm_type: float,
    max_norm: float | None,
    scale: torch.Tensor | None,
) -> None:
    """Note the clip in the thread (and in its step, when one is under way)."""
    if isinstance(total, torch.Tensor):
        total = total.detach()
        here.clip_total = total if scale is None else total / scale
    here.norm_type = norm_type
    if max_norm is not None:
        here.max_norm = max_norm
        here.clip_site, here.clip_taken = user_line(), here.current is not None
    if scale is not None:
        here.scaled_clip, here.clip_scale = True, scale
    current = here.current
    if current is not None:  # a clip inside the step, after its closure ran
        current.grad_norm, current.norm_type = here.clip_total, here.norm_type
        current.max_norm = here.max_norm
        current.scaled_clip, current.clip_scale = here.scaled_clip, here.clip_scale


def traced(state: WatchState, here: ThreadState) -> None:
    """A clip inside a compiled graph since the last step: its total and max_norm, the
    parameters it touched unknown (any optimizer's). The norms before it are the
    gradients' now divided by torch's clip coefficient, which scaled them all alike."""
    total, norm_type, max_norm = state.traced_clip or (None, 2.0, None)
    state.traced_clip = None
    if not isinstance(total, torch.Tensor):
        return
    here.clip_params = None
    if max_norm is not None:
        coefficient = torch.clamp(float(max_norm) / (total.detach() + 1e-6), max=1.0)
        here.pre_clip = state.measure.grads(state.foreign(here)) / coefficient
        max_norm = float(max_norm)
    clipped(here, total, float(norm_type), max_norm, None)


def unused(state: WatchState, here: ThreadState) -> None:
    """The thread's clip is dropped at the first backward after a step: one that bounded
    (a finite max_norm) and that no step took ran where no step applies what it clipped
    (before the backward, on the previous step's gradients or none; after the step).
    Counted per line of the script, with the parameters it touched (UnusedClip)."""
    if here.max_norm is None or not math.isfinite(here.max_norm) or here.clip_taken:
        return
    site = here.clip_site or "?"
    index = state.tracked.index
    touched = here.clip_params or frozenset()
    positions = tuple(sorted(index[i] for i in touched if i in index))
    seen = state.unused_clips.get(site)
    count = 1 if seen is None else seen.count + 1
    state.unused_clips[site] = UnusedClip(site, here.max_norm, count, positions)


def clip_scale(
    state: WatchState, here: ThreadState, params: list[torch.Tensor]
) -> torch.Tensor | None:
    """The loss scale the gradients of `params` are still multiplied by: their last
    backward was on a GradScaler's output and `unscale_` has not run since for any
    optimizer that owns them. None: they are not scaled."""
    scaler = here.scaled_by
    if scaler is None or not scaler.is_enabled():
        return None
    scale = getattr(scaler, "_scale", None)
    if not isinstance(scale, torch.Tensor):
        return None
    states = getattr(scaler, "_per_optimizer_states", {})
    ids = {id(p) for p in params}
    owners = [
        o for o in state.known if any(id(p) in ids for g in o.param_groups for p in g["params"])
    ]
    candidates = [states.get(id(o)) for o in owners] if owners else list(states.values())
    if any(s is not None and s.get("stage") is OptState.UNSCALED for s in candidates):
        return None
    return scale.detach().clone()  # a device tensor: no sync


def unscaled(norms_: torch.Tensor, scale: torch.Tensor | None) -> torch.Tensor:
    """Norms divided by the loss scale; -1 (no gradient) stays."""
    if scale is None:
        return norms_
    return torch.where(norms_ >= 0, norms_ / scale.to(norms_.dtype), norms_)
