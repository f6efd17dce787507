"""What a top-level backward call adds to its thread's window (the next step's): the
call counted (gradient accumulation), its loss summed on the device, the loss's kind
read now and then, its micro-batch gradient norms begun and ended (noise_scale.py); at
its start, the resets and updates by hand since the last call; at its end, what an
update by hand may follow. The nested backward of a reentrant checkpoint is not counted,
nor are the second and later evaluations of a step's closure (LBFGS's line search)."""

from __future__ import annotations

from typing import Any

import torch

from gradscope.errors import FREED_BY_GRAD, FREED_GRAPH, FREED_IN_EVAL
from gradscope.steps.step_record import input_checked
from gradscope.watcher import (
    backward_sites,
    carried_graph,
    clamped_terms,
    clipping,
    discover,
    flat_ops,
    hand_scale,
    kept_grads,
    loss_graph,
    loss_kinds,
    manual,
    modes,
    nan_probe,
    passed_through,
    resets,
    same_batch,
    sampled_grids,
    stepping,
)
from gradscope.watcher.state import WatchState
from gradscope.watcher.threads import ThreadState, Window

LOSS_KIND_EVERY = 100
"""The loss's graph is read at the first backward of steps 1-3, 101-103, ...: a few
dozen nodes, and a loss that changes its kind mid-run is still seen."""


def started(
    state: WatchState,
    here: ThreadState,
    roots: list[torch.Tensor],
    tensor: torch.Tensor | None,
    gradient: Any,
) -> None:
    """A top-level backward call starts from `roots` (`tensor`: its one root)."""
    state.backward_total += 1
    if here.quiet:
        return
    if here.step_depth and here.stepping is None:
        stepping.drop_unfinished(here)
    if state.manual.check is not None:
        manual.backward_starts(state, here)
    if state.manual.looks and state.optimizer_stepped:
        manual.look_for_strays(state, roots)
    resets.observe(state, here)
    window = here.window
    if window.calls and not here.stepped and resets.reset_by_hand(state, here):
        window = here.window = Window()  # grads set to None by hand since
    if window.calls == 0:  # a norm taken after the last step (a log) is no clip
        clipping.unused(state, here)
        here.clear_clip()
        _graph_window_began(state, roots)
        kept_grads.note_marks(state, window)
    here.zeroed = None  # a backward after the zero_grad: the usual order
    here.taken = None
    if window.calls:
        resets.between_calls(state, here, window)
    else:  # the mode the step's forward ran in, not the one at step() (an evaluation after)
        window.eval_roots = modes.in_eval(state.tracked, state.modes)
    window.calls += 1
    window.site = backward_sites.site()
    resets.note_root(window, tensor)
    if here.helper:
        window.leaves.update(id(t) for t in discover.graph_leaves(roots))
    scaled = next((x for x in here.scaled if x[0] is tensor), None)
    here.scaled_by = None if scaled is None else scaled[2]
    state.noise.begin(window, here.scaled_by, tensor)
    if not state.probe.done:
        probed(state, lambda: nan_probe.begin(state.probe, state, roots, here.scaled_by))
    if state.flat_ops.due(len(state.optimizers)):
        _observed(state, flat_ops, state.flat_ops, roots)
    if state.clamped_terms.reads < clamped_terms.READS:
        _observed(state, clamped_terms, state.clamped_terms, roots)
    if state.sampled_grids.reads < sampled_grids.READS:
        _observed(state, sampled_grids, state.sampled_grids, roots)
    _add_loss(state, window, tensor, gradient, scaled)
    state.derivatives.clear()


def _add_loss(
    state: WatchState, window: Window, tensor: torch.Tensor | None, gradient: Any, scaled: Any
) -> None:
    """The call's loss joins the step's (its kind read at the first steps): a call with a
    gradient given or on a tensor of several elements has no loss to add."""
    if tensor is None or gradient is not None or tensor.numel() != 1:
        window.loss_known = False
        return
    loss = tensor if scaled is None else scaled[1]
    if not window.kind_done and state.steps % LOSS_KIND_EVERY < 3:
        derivatives = state.derivatives.held()
        _read_kind(window, loss_graph.read(loss, scaled is not None, derivatives))
        if state.derivatives.cut_from(loss) and len(state.derivative_cut_at) < 8:
            state.derivative_cut_at.append(state.steps + 1)
    if window.calls == 1:
        state.batches.observe(loss, state.steps + 1)
        state.future.observe(state.leak.observe(loss, state.steps + 1), state.steps + 1)
    value, state.first_hand_scale = hand_scale.in_first_scale(
        state.first_hand_scale, loss, loss.detach()
    )
    if value.dtype not in (torch.float32, torch.float64):
        value = value.float()  # a half-precision loss summed over micro-batches
    if window.calls == 1:  # not `loss is None`: a wipe sets the earlier calls' loss apart
        window.first = value
    window.loss = value if window.loss is None else window.loss + value


def _read_kind(window: Window, kind: Any) -> None:
    """The step's loss is the sum of what its backward calls ran on: a second loss given its
    own backward adds its terms (its sign, its bound); a call like one read before (the next
    micro-batch of an accumulation) ends the reading, so accumulation reads two graphs."""
    key = (repr(kind.terms), kind.unknown_terms)  # repr: a NaN factor equals itself
    if key in window.kinds_read:
        window.kind_done = True
        return
    window.kinds_read.append(key)
    window.loss_kind = kind if window.loss_kind is None else loss_kinds.plus(window.loss_kind, kind)


def ended(
    state: WatchState, here: ThreadState, roots: list[torch.Tensor], retained: bool = False
) -> None:
    """The call returned (`retained`: keeping its graph): its micro-batch norms; what an
    update by hand may follow."""
    state.noise.end()
    if state.uncreated.results:
        state.uncreated.clear()
    state.released_by_grad = state.released_in_eval = False
    carried_graph.note_roots(state.graph_marks, roots)
    if not here.quiet:
        _passed(state, roots)
    if state.probe.handles:
        probed(state, lambda: nan_probe.end(state.probe, state))
    alone = state.threads.alone()
    if not here.quiet and alone:
        state.dropped.backward_ended(state.tracked.params, state.steps + 1)
    if here.stepped and not here.quiet:
        resets.sentinel(state, here, here.window)
        resets.note_left(here.window, retained)
        if input_checked(state.steps + 1):
            resets.note_inputs(state, here.window)
    idle = here.current is None and here.stepping is None
    if not state.optimizer_stepped and not here.quiet and idle:
        check = state.manual.check
        if not alone:
            manual.threaded(state)
        elif check is None or check.thread == here.ident:
            manual.guarded(state, lambda: manual.backward_end(state, here, roots))


def _graph_window_began(state: WatchState, roots: list[torch.Tensor]) -> None:
    """A step's first backward: where its graph begins, and at the steps same_batch reads,
    the watched models' buffers whose graph spans steps (carried_graph.py)."""
    carried_graph.window_began(state.graph_marks)
    if same_batch.wanted(state.steps + 1):
        models = [discover.unwrapped(m) for m in state.tracked.roots]
        carried_graph.look_for_growth(state.graph_marks, models, state.steps + 1, roots)


def failed(
    state: WatchState, here: ThreadState, roots: list[torch.Tensor], exc: BaseException
) -> None:
    """The call raised: a graph an earlier step built, reached again (carried_graph.py);
    a loss without a graph while grad mode is off (torch.set_grad_enabled(False) still in
    force at the backward), or while it is on (a value taken out of the graph on its way)."""
    if state.released_by_grad and FREED_GRAPH in str(exc):
        state.freed_by_grad = FREED_BY_GRAD + (FREED_IN_EVAL if state.released_in_eval else "")
    if not here.quiet:
        marks = state.graph_marks
        stepper = state.optimizers[marks.stepper] if marks.stepper >= 0 else None
        groups = getattr(stepper, "param_groups", [])
        params = {id(p) for g in groups for p in g["params"]}
        held = {
            id(p)
            for o in state.optimizers
            for g in getattr(o, "param_groups", [])
            for p in g["params"]
        }
        names = dict(zip(map(id, state.tracked.params), state.tracked.names, strict=True))
        models = [discover.unwrapped(m) for m in state.tracked.roots]
        carried_graph.failed(marks, roots, exc, state.steps + 1, params, held, names, models)
    if not roots or any(r.requires_grad for r in roots):
        return
    if not torch.is_grad_enabled():
        state.grad_off_at = state.grad_off_at or state.steps + 1
    else:
        state.graphless_derivative = state.graphless_at is None and state.uncreated.held()
        state.graphless_checkpoint = state.graphless_at is None and (
            state.inputs_unreached_at == state.steps + 1
        )
        state.graphless_at = state.graphless_at or state.steps + 1


def _observed(state: WatchState, module: Any, part: Any, roots: list[torch.Tensor]) -> None:
    """A graph reader's part (flat_ops, clamped_terms, sampled_grids: `module` names its
    READS and PART): a failure switches that part off, never the watch."""
    try:
        part.observe(roots)
    except Exception as exc:
        part.reads = module.READS
        state.failed(module.PART, exc, whole=False)


def _passed(state: WatchState, roots: list[torch.Tensor]) -> None:
    """What lies below each trained tensor's op (passed_through.py), read after a backward
    once another optimizer has stepped (the graph's nodes outlive its saved tensors): a
    failure switches that reading off, never the watch."""
    known = len(state.optimizers)
    if known < 2 or state.passed is None or known == state.passed_known:
        return
    try:
        held = passed_through.owners(state.optimizers)
        read = passed_through.below_each_leaf(roots, held)
        state.passed_known = len(state.optimizers)
        if read is not None:
            state.passed = read
    except Exception as exc:
        state.passed = None
        state.failed(passed_through.PART, exc, whole=False)


def probed(state: WatchState, work: Any) -> None:
    """The NaN probe's part: a failure switches the probe off, never the watch."""
    try:
        work()
    except Exception as exc:
        for handle in state.probe.handles:
            handle.remove()
        state.probe.handles, state.probe.done = [], True
        state.failed(nan_probe.PART, exc, whole=False)
