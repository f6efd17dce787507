"""An optimizer step, from its start (`begin`: the gradients, the loss, the clip and the
loss scale it applies, as device tensors) to its end (`finish`: the update, then the
recorder). A step reads no gradient of a parameter another thread steps (reading
`p.grad` while another thread sets it to None and frees it crashes torch). Steps are
numbered when they end (record_step.py)."""

from __future__ import annotations

from typing import Any

import torch

from gradscope.steps.step_record import input_checked
from gradscope.watcher import (
    applied,
    carried_graph,
    clipping,
    discover,
    first_norms,
    grad_rewrites,
    group_swaps,
    loss_kinds,
    manual,
    reapplied,
    record_step,
    replaced,
    resets,
    updates,
    wrapped_steps,
)
from gradscope.watcher.measure import norms
from gradscope.watcher.recorder import PendingStep
from gradscope.watcher.state import WatchState
from gradscope.watcher.threads import ThreadState, Window

NO_CLIP = ThreadState(0, "no clip", False)
"""The clip fields of a thread that has not clipped: what a step the clip is not for gets."""


def begin(
    state: WatchState, here: ThreadState, optimizer: Any, skipped: bool, returned: Any = None
) -> None:
    """The step starts (or its closure's first evaluation returned `returned`)."""
    here.stepping = None
    if state.replaced:  # a watched model registered a parameter or module since
        replaced.refresh(state)
    index = optimizer_index(state, here, optimizer)
    window, zeroed = _window_for(state, here, optimizer, index)
    note_meaning(state, index, optimizer, window)
    scaler = scaler_for(here, optimizer)
    clip = _clip_for(state, here, optimizer)
    scale = _scale_of(scaler)
    written = window.calls > 0 and wrapped_steps.written_by_wrapper(window, optimizer)
    taken = applied.applied(window, optimizer, written)
    here.current = PendingStep(
        step=state.steps + 1,  # numbered when it ends: threads end them in any order
        optimizer=index,
        lrs=tuple(_lr(g) for g in optimizer.param_groups),
        backward_calls=taken.calls,
        skipped=_skipped_flag(optimizer, skipped),
        param_norm=_grad_norms(state, here, index, optimizer, clip),
        loss=_loss(taken, window.loss_known, returned),
        grad_norm=clip.clip_total,
        max_norm=clip.max_norm,
        norm_type=clip.norm_type,
        scaled_clip=clip.scaled_clip,
        clip_scale=clip.clip_scale,
        scale=scale,
        carried=resets.carried(state, optimizer),
        members=state.members(optimizer),
        zeroed=zeroed is not None,
        wiped=taken.wiped,
        rewritten=taken.wiped is not None and grad_rewrites.combined_by_hand(window),
        input_added=_input_added(state, window),
        reapplied=_reapplied(state, optimizer, window),
        written=written,
    )
    _micro(state, here.current, window)
    state.modes.observe(
        state.tracked, index, here.current.members, state.steps + 1, window.eval_roots
    )
    step = state.steps + 1
    if not skipped and updates.sampled(step, state.update_every):
        params = [p for g in optimizer.param_groups for p in g["params"]]
        turn = step if updates.rotated(step, state.update_every) else None
        here.snapshot = (params, state.updates.before(optimizer, params, turn))


def _window_for(
    state: WatchState, here: ThreadState, optimizer: Any, index: int
) -> tuple[Window, Window | None]:
    """The backward calls the step applies, and the window a zero_grad since closed (None:
    none): its own calls; else those a zero_grad just wiped (the step follows them, their
    grads gone); else those another optimizer stepped on before it."""
    window = window_of(state, here, optimizer)
    zeroed = here.zeroed
    if zeroed is not None and not window.calls:
        window = zeroed
    elif not window.calls and here.taken is not None and index not in here.taken_by:
        window = here.taken.shared()
    return window, zeroed


def _grad_norms(
    state: WatchState, here: ThreadState, index: int, optimizer: Any, clip: ThreadState
) -> torch.Tensor:
    """[P] gradient norms the step applies, unscaled."""
    if clip.pre_clip is not None:
        return clip.pre_clip  # measured (and unscaled) at the clip
    norms_ = state.measure.grads(state.foreign(here, index))
    grad_scale = getattr(optimizer, "grad_scale", None)  # fused + GradScaler
    if isinstance(grad_scale, torch.Tensor):
        norms_ = clipping.unscaled(norms_, grad_scale)
    return norms_


def _scale_of(scaler: Any) -> torch.Tensor | None:
    """The GradScaler's scale as a device tensor (no sync, unlike get_scale()); None: no
    scaler, or none to read."""
    scale = None if scaler is None else getattr(scaler, "_scale", None)
    return scale.detach().clone() if isinstance(scale, torch.Tensor) else None


def _reapplied(state: WatchState, optimizer: Any, window: Window) -> bool:
    """No backward since the optimizer's previous step, and `.grad` still holds the
    gradients that step applied (reapplied.py)."""
    trained = resets.trained(state, optimizer)
    return reapplied.again(state.of(optimizer).applied, trained, window.calls)


def _input_added(state: WatchState, window: Window) -> bool:
    """At the steps input_checked names: the first call was made for an input's gradient
    and its parameter gradients are in this step (resets.input_added)."""
    checked = input_checked(state.steps + 1) and not window.wiped
    return checked and resets.input_added(state, window)


def _skipped_flag(optimizer: Any, skipped: bool) -> bool | torch.Tensor:
    """Skipped by GradScaler: known, or a fused optimizer's `found_inf` (on the device)."""
    found_inf = getattr(optimizer, "found_inf", None)
    if not skipped and isinstance(found_inf, torch.Tensor):
        return found_inf.detach().clone()
    return skipped


def _loss(taken: applied.Applied, known: bool, returned: Any) -> torch.Tensor | float | None:
    """The step's loss: the closure's value, or what the backward calls whose gradients it
    applies ran on (applied.py)."""
    if isinstance(returned, torch.Tensor) and returned.numel() == 1:
        return returned.detach().reshape(())
    if isinstance(returned, (int, float)) and not isinstance(returned, bool):
        return float(returned)
    return taken.loss if known else None


def finish(state: WatchState, here: ThreadState, optimizer: Any) -> None:
    """The step ended: its update (measured steps), then the recorder."""
    current, here.current = here.current, None
    if current is None:
        return
    counted = None
    if here.snapshot is not None:
        params, before = here.snapshot
        here.snapshot = None
        current.update_norm = state.updates.after(before)
        if before.measured is not None:
            params = before.measured  # a rotated step: the others have no ratio to read
        current.weight_norm = state.measure.scatter(params, norms([p.detach() for p in params]))
        counted = state.adam_rms.observe(state.tracked, current.optimizer, optimizer, current.step)
    trained = resets.trained(state, optimizer)
    resets.stepped(state, optimizer, trained, here.ident)
    watch = state.of(optimizer)
    if watch.applied is not None or current.backward_calls == 0:
        watch.applied = reapplied.applied(trained)
    carried_graph.stepped(state.graph_marks, optimizer)
    state.adam_eps.observe(state.tracked, current.optimizer, optimizer, current.step, counted)
    record_step.record(state, here, current)


def optimizer_index(state: WatchState, here: ThreadState, optimizer: Any) -> int:
    """The optimizer's index; its first step makes it one of the watched (and ends the
    search for updates by hand)."""
    index = state.index_of(optimizer)
    group_swaps.swapped(state, optimizer)  # add_param_group, tensors swapped in
    if index < 0:
        manual.taken_over(state, here)  # updates by hand end here
        state.optimizers.append(optimizer)
        state.optimizer_stepped = True
        if all(optimizer is not k for k in state.known):
            state.known.append(optimizer)
        state.discovered = True
        if not discover.covered(state.tracked, [optimizer]):
            discover.extend(state.tracked, state.known)
        index = len(state.optimizers) - 1
        kept, state.tracked.walked = state.tracked.walked, []
        walked = kept + state.known if kept else None  # the optimizer stepping is known
        scanned = state.frozen_norms.start(state.steps + 1, walked)
        state.eval_passes.hook_copies(state.tracked.roots, scanned)
        if state.threads.alone():  # it reads every model's .grad (threads.Threads.alone)
            state.eval_passes.hook_owners(state.tracked.roots, state.tracked.index)
    if state.idle_pending:
        _track_idle(state)
    state.of(optimizer).stepped_by.add(here.ident)
    here.stepped = True
    return index


def _track_idle(state: WatchState) -> None:
    """At a step, the models of the optimizers zeroed since the last one that have not
    stepped: their gradients are measured from here on (a step() the script forgot)."""
    zeroed, state.idle_pending = state.idle_pending, []
    found = [state.zeroed.get(k) for k in zeroed]
    idle = [o for o in found if o is not None and all(o is not k for k in state.known)]
    if idle:
        discover.add_idle(state.tracked, idle)
        state.idle_held.update(
            (id(p), type(o).__name__)
            for o in idle
            for g in o.param_groups
            for p in g["params"]
            if id(p) in state.tracked.index
        )


def window_of(state: WatchState, here: ThreadState, optimizer: Any) -> Window:
    """The step's backward calls: this thread's since its previous step, and those of
    helper threads whose backward reached the optimizer's parameters (taken)."""
    helpers = state.threads.helpers(here)
    if not helpers:
        return here.window
    ids = {id(p) for g in optimizer.param_groups for p in g["params"]}
    window = Window(here.window.calls, here.window.whole_loss(), here.window.loss_known)
    for helper in helpers:
        if helper.window.leaves & ids:
            window.add(helper.window)
            helper.window = Window()
    return window


def note_meaning(state: WatchState, index: int, optimizer: Any, window: Window) -> None:
    """What the step's numbers mean: the optimizer's settings (every step), the loss's
    kind (where it was read), the line its backward was called from, the weights' norms
    before the first update."""
    state.settings.observe(index, state.steps + 1, optimizer)
    state.backward_sites.note(index, state.steps + 1, window.site)
    watch = state.of(optimizer)
    if watch.loss_kind is None:
        watch.loss_kind = window.loss_kind
    elif window.loss_kind is not None:
        watch.loss_kind = loss_kinds.union(watch.loss_kind, window.loss_kind)
    state.first_weights = first_norms.extended(state.first_weights, state.measure)


def _micro(state: WatchState, step: PendingStep, window: Window) -> None:
    """The micro-batch gradients the step's window measured; hooks on parameters
    found since (from the first step of several backward calls on)."""
    taken = state.noise.take(window)
    if taken is not None:
        step.micro, step.micro_calls, step.micro_ranks, step.batch_samples = taken
    state.noise.attach(window.calls)
    state.eval_passes.attach()


def _clip_for(state: WatchState, here: ThreadState, optimizer: Any) -> ThreadState:
    """The thread when its clip (or one inside a compiled graph since) is the step's."""
    if state.traced_clip is not None:
        clipping.traced(state, here)
    return here if clip_is_for(here, optimizer) else NO_CLIP


def clip_is_for(here: ThreadState, optimizer: Any) -> bool:
    """The thread's clip goes to each optimizer that steps a parameter it touched
    (a dense optimizer's clip is not a SparseAdam's beside it), once each."""
    if here.clip_params is not None and here.clip_params.isdisjoint(
        id(p) for g in optimizer.param_groups for p in g["params"]
    ):
        return False
    if id(optimizer) in here.clip_takers:
        return False
    here.clip_takers.add(id(optimizer))
    here.clip_taken = True
    return True


def scaler_for(here: ThreadState, optimizer: Any) -> Any:
    """The GradScaler whose `step` is stepping the optimizer (None: none, or disabled)."""
    for call in reversed(here.scaler_calls):
        if call[1] is optimizer:
            call[2] = True  # the step (or the skip) is being recorded
            return call[0] if call[0].is_enabled() else None
    return None


def drop_unfinished(here: ThreadState) -> None:
    """A step that raised (its post-hook never ran) is not recorded."""
    here.current, here.snapshot, here.stepping = None, None, None
    here.step_depth = 0


def _lr(group: dict[str, Any]) -> float:
    """The group's lr; NaN where there is no number to read: None (transformers'
    Adafactor at its defaults works its own out), a device tensor (reading it would
    sync), anything else."""
    lr = group.get("lr")
    if isinstance(lr, torch.Tensor):
        if lr.numel() != 1 or lr.device.type != "cpu":
            return float("nan")
        return float(lr.item())
    try:
        return float(lr)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return float("nan")
