"""Updates by hand: steps of a script that never steps an optimizer
(`p.data.add_(p.grad, alpha=-lr)`, `p -= lr * p.grad` under no_grad).

At the end of each top-level backward the gradients are measured (the script often
zeroes them right after updating) and the weights fingerprinted (version counters and
float64 norms: `.data` writes bump no version); at the next backward's start, or when
the watch ends, a changed fingerprint is a step of the `records.MANUAL` optimizer.
Deciding that reads one small vector back per backward, a cost paid only while no
optimizer has stepped. The search runs in every script: should it ever fail, it stops
with a note (`guarded`), and the script runs on.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from gradscope.watcher import discover, external_driver, record_step, resets, updates
from gradscope.watcher.manual_search import ManualCheck, ManualUpdates
from gradscope.watcher.recorder import PendingStep
from gradscope.watcher.state import WatchState
from gradscope.watcher.subclass_leaves import leaf_grad
from gradscope.watcher.threads import ThreadState


def guarded(state: WatchState, check: Callable[[], None]) -> None:
    """Run a part of the search; a failure ends the search, with a note."""
    try:
        check()
    except Exception as exc:
        state.manual.check, state.manual.scanned = None, True
        state.notes.append(
            f"updates by hand are not watched: {type(exc).__name__}: {exc}".rstrip(": ")
        )


def backward_starts(state: WatchState, here: ThreadState) -> None:
    """A backward starts: did the weights move since the last one (this thread's)?"""
    last = state.manual.check
    if last is not None and last.pending and last.thread == here.ident:
        if state.threads.alone():
            guarded(state, lambda: check(state, here))
        else:
            threaded(state)


def threaded(state: WatchState) -> None:
    """A second thread runs backward calls before any optimizer stepped: the search,
    which reads every tracked gradient, ends (threads.Threads.alone)."""
    search = state.manual
    if search.check is not None or not search.scanned:
        search.check, search.scanned, search.threaded = None, True, True


def backward_end(state: WatchState, here: ThreadState, roots: list[torch.Tensor]) -> None:
    """No optimizer has stepped: note what this backward left, for the check at the
    next backward's start (or the end of the watch)."""
    manual = state.manual.check
    driven = external_driver.driving_module() is not None
    if manual is None:
        if state.manual.scanned:
            return
        state.manual.scanned = True
        params = [p for p in discover.graph_leaves(roots) if leaf_grad(p) is not None]
        if not params:
            return
        discover.extend(state.tracked, state.known, params, extra_name="tensor")
        manual = state.manual.check = ManualCheck(params, here.ident)
    elif driven:
        guarded(state, lambda: external_driver.newly_reached(state, manual, roots))
    manual.driven = driven
    tracked = state.tracked.params
    if manual.weights is None or len(manual.versions) != len(tracked):
        manual.weights = state.measure.weights()
        manual.versions = [p._version for p in tracked]
    if state.first_weights is None:
        state.first_weights = manual.weights
    manual.grads = state.measure.grads()
    manual.members = tuple(i for i, p in enumerate(tracked) if leaf_grad(p) is not None)
    manual.loss = here.window.whole_loss()
    manual.kind = here.window.loss_kind or manual.kind
    manual.loss_known = here.window.loss_known
    manual.calls = here.window.calls
    manual.eval_roots = here.window.eval_roots
    if updates.sampled(state.steps + 1, state.update_every):  # the next step's is measured
        manual.before = state.updates.before(None, tracked)
    manual.pending = True


def finish(state: WatchState) -> None:
    """The watch ends: an update by hand after the last backward is a step too."""
    if state.manual.threaded and not state.optimizer_stepped:
        state.notes.append(
            "updates by hand were not looked for: backward calls ran in more than one"
            " thread before any optimizer stepped"
        )
    with state.threads.lock:
        manual = state.manual.check
        if manual is not None and manual.pending and not state.optimizer_stepped:
            owner = state.threads.states.get(manual.thread) or state.threads.here()
            check(state, owner, final=True)


def taken_over(state: WatchState, here: ThreadState) -> None:
    """An optimizer's first step: an update by hand since this thread's last backward
    is still a step; the search ends here."""
    manual = state.manual.check
    if manual is not None:
        if manual.pending and manual.thread == here.ident:
            check(state, here)
        search, index, owners = state.manual, state.tracked.index, state.tracked.owners
        found = (index.get(id(p), -1) for p in manual.params)
        search.strays = {i for i in found if i >= 0 and i not in owners} - search.updated
        search.looks = STRAY_LOOKS if search.strays else 0
        state.manual.check = None


STRAY_LOOKS = 3
"""Backward calls after the first step in which a tensor the first scan found outside
every model must be a leaf again to be read as a weight."""


def look_for_strays(state: WatchState, roots: list[torch.Tensor]) -> None:
    """A backward after the first step: the strays among its graph's leaves are weights
    (a bare tensor the script trains); those none of STRAY_LOOKS calls reached were one
    step's input made to require grad, and hold that step's gradient to the end."""
    search = state.manual
    try:
        leaves = {id(t) for t in discover.graph_leaves(roots)}
    except Exception:
        search.strays, search.looks = set(), 0  # not known: judged as before
        return
    params = state.tracked.params
    search.strays = {i for i in search.strays if id(params[i]) not in leaves}
    search.looks -= 1
    if search.looks <= 0 or not search.strays:
        search.one_step |= search.strays
        search.strays, search.looks = set(), 0


def check(state: WatchState, here: ThreadState, final: bool = False) -> None:
    """Did the weights move since the last backward? If so, that was a step."""
    manual = state.manual.check
    assert manual is not None and manual.weights is not None and manual.grads is not None
    manual.pending = False
    tracked = state.tracked.params[: len(manual.versions)]
    now = state.measure.weights()[: len(tracked)]
    changed = _changed(state, manual, tracked, now)
    if not any(changed):
        manual.before = None
        return
    state.manual.updated.update(i for i, c in enumerate(changed) if c)
    members = _moved_members(manual.members, tracked, changed)
    narrowed, manual.members = members != manual.members, members
    holder = _holder(state, here, manual, tracked)
    step = _step(state, here, manual, holder)
    assert state.manual.index is not None
    if manual.driven:
        external_driver.note_driver(state, state.manual.index, step.step)
    # as after an optimizer's step: gradients still there at the next backward's
    # start were never reset (the script's zero_grad is missing); only those of the
    # tensors it moved (PGD's input, beside model gradients the attack left alone)
    moved = [tracked[i] for i in manual.members if changed[i]]
    resets.stepped(state, holder, moved, here.ident)
    if manual.before is not None:
        step.update_norm = _only(state.updates.after(manual.before), members, narrowed)
        step.weight_norm = now
        manual.before = None
    manual.weights = now
    manual.versions = [p._version for p in tracked]
    if not final:
        record_step.record(state, here, step)
    elif not state.stopped:
        record_step.add(state, step)


def _moved_members(
    members: tuple[int, ...], tracked: list[torch.Tensor], changed: list[bool]
) -> tuple[int, ...]:
    """The update's parameters: those with gradients, unless it moved only tensors that are
    no nn.Parameter while parameters had gradients (PGD's `delta`, an input optimised by
    hand): then only those, the model's gradients were not what it applied."""
    moved = tuple(i for i in members if changed[i])
    plain = not any(isinstance(tracked[i], torch.nn.Parameter) for i in moved)
    if moved and plain and any(isinstance(tracked[i], torch.nn.Parameter) for i in members):
        return moved
    return members


def _only(norms: torch.Tensor, members: tuple[int, ...], narrowed: bool) -> torch.Tensor:
    """The update norms of `members` alone where `_moved_members` narrowed them (-1, not
    measured, elsewhere): the model weights an attack left alone are no update's."""
    if not narrowed:
        return norms
    keep = torch.zeros(len(norms), dtype=torch.bool, device=norms.device)
    keep[[i for i in members if i < len(norms)]] = True
    return torch.where(keep, norms, torch.full_like(norms, -1))


def _changed(
    state: WatchState, manual: ManualCheck, tracked: list[torch.Tensor], now: torch.Tensor
) -> list[bool]:
    """Per tracked parameter: its weights changed (norm or version counter)."""
    before = manual.weights
    assert before is not None
    same = (now == before) | (now.isnan() & before.isnan())
    flags = torch.cat([~same, now.isnan().any().reshape(1)])
    *moved, lost = flags.tolist()  # the one read-back that decides whether a step happened
    if lost and not state.nan_noted:
        state.nan_noted = True
        state.notes.append(
            f"weights updated by hand became NaN at step {state.steps + 1}: updates of NaN "
            "weights through `.data` change nothing gradscope can see, so steps after it "
            "may be missing"
        )
    return [m or p._version != v for m, p, v in zip(moved, tracked, manual.versions, strict=True)]


def _holder(
    state: WatchState, here: ThreadState, manual: ManualCheck, tracked: list[torch.Tensor]
) -> ManualUpdates:
    """The stand-in optimizer of updates by hand, holding every parameter updated."""
    search = state.manual
    if search.index is None:
        search.index = len(state.optimizers)
        state.optimizers.append(ManualUpdates())
    holder: ManualUpdates = state.optimizers[search.index]
    watch = state.of(holder)
    watch.stepped_by.add(here.ident)
    if watch.loss_kind is None:
        watch.loss_kind = manual.kind
    present = {id(p) for g in holder.param_groups for p in g["params"]}
    holder.param_groups[0]["params"] += [
        tracked[i]
        for i in sorted(set(manual.members) | search.updated)
        if id(tracked[i]) not in present
    ]
    return holder


def _step(
    state: WatchState, here: ThreadState, manual: ManualCheck, holder: ManualUpdates
) -> PendingStep:
    index = state.manual.index
    assert manual.grads is not None and index is not None
    state.modes.observe(state.tracked, index, manual.members, state.steps + 1, manual.eval_roots)
    return PendingStep(
        step=state.steps + 1,
        optimizer=index,
        lrs=(),
        backward_calls=manual.calls,
        skipped=False,
        param_norm=manual.grads,
        loss=manual.loss if manual.loss_known else None,
        grad_norm=here.clip_total,
        max_norm=here.max_norm,
        norm_type=here.norm_type,
        members=manual.members,
        carried=resets.carried(state, holder),
    )
