"""Resets of the gradients: which backward calls a step takes, and gradients never reset.

A thread's first step takes only the backward calls since its last reset of gradients
that held something (zero_grad of an optimizer or a module, or the gradients the first
backward reached all set to None by hand): backward-only iterations before an optimizer
exists (a warm-up, a gradient statistic) are not counted into its loss. At each
top-level backward's start, every optimizer whose last step has not been followed by a
reset of its gradients yet gets their norm noted (`p.grad is None` checks; a device norm
only when they are all there): the carried-over norm of its next step (GS412).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import torch

from gradscope.autograd_walk import NodeWalk
from gradscope.errors import user_line
from gradscope.watcher import discover, kept_grads
from gradscope.watcher.measure import norms
from gradscope.watcher.optimizer_watch import OpenReset
from gradscope.watcher.state import WatchState
from gradscope.watcher.subclass_leaves import leaf_grad
from gradscope.watcher.threads import ThreadState, Window


def reset_by_hand(state: WatchState, here: ThreadState) -> bool:
    """Before this thread's first step: the gradients its first backward reached were
    all set to None since (the script resets them itself)."""
    manual = state.manual.check
    if manual is None or manual.thread != here.ident:
        return False
    return all(p.grad is None for p in manual.params)


def resetting(state: WatchState, here: ThreadState, params: Callable[[], Any]) -> None:
    """A zero_grad is about to run: when it clears gradients that are there, the
    backward calls before it belong to no step (this thread's, before its first
    step; a helper thread's whose backward reached them)."""
    helpers = state.threads.helpers(here)
    if not helpers and not here.window.calls:
        return
    reset = list(params())
    present = {id(p) for p in reset if p.grad is not None}
    if not present:
        if here.window.calls:
            here.window.reset_unreached(frozenset(id(p) for p in reset))
            kept_grads.note_marks(state, here.window)
        return
    if here.window.calls and (consumed(here.window) or for_input(state, here.window)):
        here.window = Window()  # used (SAM's ascent, an attack's input): the next calls step
    elif here.window.calls:
        here.zeroed = here.window
        here.window.judged = here.window.calls
        if not kept_grads.kept_by_another(state, here.window, present):
            here.window.wipe(present)  # more backward calls may follow: wiped
            if here.stepped and "wiped" not in state.sites:
                state.sites["wiped"] = user_line() or "?"
        kept_grads.note_marks(state, here.window)
    if not here.stepped:
        here.window = Window()
    for helper in helpers:
        if helper.window.leaves & present:
            helper.window = Window()


def written_by_hand(window: Window) -> bool:
    """At a step after a reset between backward calls that all kept their graph: the
    sentinel's gradient is no longer the tensor the last backward left, it was assigned
    since (PCGrad, CAGrad: one objective of a forward at a time, each gradient read and
    reset, their combination written into `.grad`), so the reset wiped nothing the step
    meant to apply. Micro-batches of an accumulation free their graph at each backward."""
    return window.retained >= window.wiped and assigned_since(window)


def written_since(window: Window) -> bool:
    """The sentinel's gradient was assigned or written in place since the window's last
    backward left it: the step applies a gradient the script wrote, not the backward."""
    grad = None if window.sentinel is None else window.sentinel.grad
    return assigned_since(window) or (grad is not None and grad._version != window.left_version)


def assigned_since(window: Window) -> bool:
    """The sentinel's gradient is no longer the tensor the window's last backward left: the
    script assigned a new one since."""
    sentinel, left = window.sentinel, window.left
    if sentinel is None:
        return False
    grad = sentinel.grad
    return grad is not None and (left is None or grad is not left())


def note_left(window: Window, retained: bool) -> None:
    """At a backward's end: whether the leading calls keep their graph, and the gradient
    tensor the call left in the sentinel's `.grad` (weakly: no gradient kept alive, but
    after a wipe, when a tensor written by hand at the step is compared with it)."""
    if retained and window.retained == window.calls - 1:
        window.retained = window.calls
    sentinel = window.sentinel
    grad = None if sentinel is None else sentinel.grad
    window.left = None if grad is None else weakref.ref(grad)
    window.left_version = -1 if grad is None else grad._version
    window.last = grad if window.wiped else None


def consumed(window: Window) -> bool:
    """The weights were changed in place since the window's first backward gave them
    gradients (its sentinel's version moved): those gradients were used before this
    reset (SAM's ascent to w + e(w)), not thrown away."""
    sentinel = window.sentinel
    return sentinel is not None and sentinel._version != window.sentinel_version


def note_root(window: Window, tensor: torch.Tensor | None) -> None:
    """At a backward call's start (counted): its root's grad_fn, the window's first and
    last, for `for_input` and `input_added` (walked only where those ask)."""
    window.root = tensor.grad_fn if tensor is not None else None
    if window.calls == 1:
        window.first_root = window.root


def for_input(state: WatchState, window: Window) -> bool:
    """The window's last backward call reached a leaf that is neither an nn.Parameter nor
    any optimizer's, and gave it a gradient: the calls were made for that input's gradient
    (PGD's attack on `x + delta`, a saliency map), the parameters' a by-product the reset
    throws away on purpose. Walked only here, at a reset between backward calls."""
    return reaches_input(state, window.root)


def input_added(state: WatchState, window: Window) -> bool:
    """At a step of several backward calls with no reset between: the first call gave an
    input its gradient and the last did not (PGD's attack by backward, then the training
    backward, without model.zero_grad()), or the script reset that input's gradient after
    the first call and not the parameters' (`inputs_reset`: an EBM's Langevin sampler by
    backward, whose last sample the training forward reads, leaf and all), and both
    reached a same parameter: the attack's
    parameter gradients are in the update, summed with the training one's. A first call
    whose parameters the last does not reach adds nothing twice (GradCache: the loss on the
    cached representations, leaves, then each chunk re-encoded with backward(rep.grad)).
    Walked only at such steps."""
    if window.calls < 2 or window.first_root is None or window.first_root is window.root:
        return False
    first = reaches_input(state, window.first_root, first_order=True)
    if not first or (reaches_input(state, window.root) and not window.inputs_reset):
        return False
    return bool(_params_reached(state, window.first_root) & _params_reached(state, window.root))


def _params_reached(state: WatchState, root: Any) -> set[int]:
    """ids of the optimizers' tensors a backward from `root` reaches."""
    owned = discover.optimizer_params(
        [o for o in state.optimizers if isinstance(o, torch.optim.Optimizer)]
    )
    return {
        id(t)
        for node in NodeWalk([root], limit=discover.MAX_GRAPH_NODES)
        if (t := getattr(node, "variable", None)) is not None and id(t) in owned
    }


def reaches_input(state: WatchState, root: Any, first_order: bool = False) -> bool:
    """A backward from `root` gave a gradient to a leaf that is neither an nn.Parameter nor
    any optimizer's. `first_order`: and its graph holds no node of a gradient taken with
    create_graph (`...BackwardBackward0`): a gradient penalty's input is reached through
    them, and its parameter gradients are meant for the step."""
    if root is None:
        return False
    if first_order:
        return bool(first_order_inputs(state, root))
    owned = discover.optimizer_params(
        [o for o in state.optimizers if isinstance(o, torch.optim.Optimizer)]
    )
    for node in NodeWalk([root], limit=discover.MAX_GRAPH_NODES):
        t = getattr(node, "variable", None)
        if isinstance(t, torch.Tensor) and not isinstance(t, torch.nn.Parameter):
            if id(t) not in owned and leaf_grad(t) is not None:
                return True
    return False


def first_order_inputs(state: WatchState, root: Any) -> list[torch.Tensor]:
    """The leaves neither an nn.Parameter nor any optimizer's that a backward from `root`
    gave a gradient; none where its graph holds a node of a gradient taken with
    create_graph (`...BackwardBackward0`): a gradient penalty's input is reached through
    them, and its parameter gradients are meant for the step."""
    owned = discover.optimizer_params(
        [o for o in state.optimizers if isinstance(o, torch.optim.Optimizer)]
    )
    found = []
    for node in NodeWalk([root], limit=discover.MAX_GRAPH_NODES):
        if "BackwardBackward" in type(node).__name__:
            return []
        t = getattr(node, "variable", None)
        if isinstance(t, torch.Tensor) and not isinstance(t, torch.nn.Parameter):
            if id(t) not in owned and leaf_grad(t) is not None:
                found.append(t)
    return found


def note_inputs(state: WatchState, window: Window) -> None:
    """At the window's first call's end: the inputs it gave a gradient, each with that
    gradient as the call left it (weakly: nothing kept alive)."""
    if window.calls == 1 and window.first_root is not None:
        window.inputs = tuple(
            (weakref.ref(t), weakref.ref(g), g._version)
            for t in first_order_inputs(state, window.first_root)
            if (g := leaf_grad(t)) is not None
        )


def inputs_reset(window: Window) -> None:
    """At the window's second call's start: an input's gradient the first call left was
    set to None, replaced or zeroed in place since, while the parameters' gradients were
    kept (a reset of theirs begins a new window): the script took the input's gradient
    call by call (a Langevin sampler's or an attack's steps by backward), and the
    parameter gradients of those calls pile up for the step."""
    noted, window.inputs = window.inputs, ()
    for leaf, grad, version in noted:
        t = leaf()
        if t is None:
            continue
        now = leaf_grad(t)
        if now is None or now is not grad() or now._version != version:
            window.inputs_reset = True
            return


def observe(state: WatchState, here: ThreadState) -> None:
    """At a backward's start: each optimizer this thread stepped whose gradients were
    not reset since its step either has one of them None now (a reset) or gets their
    norm noted. Another thread's gradients are never read."""
    for entry in state.open_resets():
        if entry.reset or entry.thread != here.ident:
            continue
        grads = [p.grad for p in entry.params]
        present = [g for g in grads if g is not None]
        if len(present) < len(grads):
            entry.reset, entry.low = True, None
        elif present:
            marks = [(id(g), g._version) for g in present]
            if marks == entry.marks:
                continue  # the same gradients, untouched since measured (a dropped optimizer's)
            entry.marks = marks
            norm = torch.linalg.vector_norm(torch.stack(norms(present)))
            entry.low = norm if entry.low is None else torch.minimum(entry.low, norm)
            if not entry.held:
                entry.held = [weakref.ref(g) for g in present]


def between_calls(state: WatchState, here: ThreadState, window: Window) -> None:
    """At a later backward call's start: what the script reset since the previous call."""
    wiped_by_hand(state, here, window)
    if window.inputs:
        inputs_reset(window)


def wiped_by_hand(state: WatchState, here: ThreadState, window: Window) -> None:
    """At a backward's start, after this thread's first step: the gradients the
    window's earlier calls left were set to None by hand since (one parameter looked
    at, no device read), so the step will apply none of them."""
    sentinel = window.sentinel
    if window.judged == window.calls:
        return  # the reset since the last call was a zero_grad, judged then
    if sentinel is not None and sentinel.grad is None and here.stepped:
        if not kept_grads.kept_by_another(state, window, {id(sentinel)}):
            window.wipe({id(sentinel)})


def sentinel(state: WatchState, here: ThreadState, window: Window) -> None:
    """At a backward's end: the first parameter it gave a gradient among those this
    thread's optimizers stepped, once per window (`wiped_by_hand` looks at it). Another
    thread's gradients are never read: its zero_grad may be freeing them."""
    if window.sentinel is None:
        entries = state.open_resets()
        own = (p for e in entries if e.thread == here.ident for p in e.params)
        window.sentinel = next((p for p in own if p.grad is not None), None)
        if window.sentinel is not None:
            window.sentinel_version = window.sentinel._version


def clearing(state: WatchState, optimizer: Any, params: Any) -> None:
    """Before a zero_grad of an optimizer not yet stepped: the tensors whose gradient it
    clears were reached by a backward, even where no step saw them there (an aux loss
    backpropagated after the main step, its own step left out)."""
    if all(optimizer is not o for o in state.optimizers):
        state.cleared_unstepped.update(id(p) for p in params if p.grad is not None)


def optimizer_reset(state: WatchState, optimizer: Any) -> None:
    """The optimizer's zero_grad ran (kept, weakly, among those that did: one whose step()
    never runs still holds its parameters)."""
    if id(optimizer) not in state.zeroed:
        state.zeroed[id(optimizer)] = optimizer
        state.idle_pending.append(id(optimizer))
    state.zero_grads[id(optimizer)] = state.zero_grads.get(id(optimizer), 0) + 1
    entry = state.of(optimizer).reset
    if entry is not None:
        entry.reset, entry.low = True, None


def module_reset(state: WatchState, module: Any) -> None:
    """A module's zero_grad ran: a reset of every optimizer whose parameters are all its."""
    open_ = [e for e in state.open_resets() if not e.reset]
    if open_:
        ids = {id(p) for p in module.parameters()}
        for entry in open_:
            if all(id(p) in ids for p in entry.params):
                entry.reset, entry.low = True, None


def stepped(state: WatchState, optimizer: Any, params: list[torch.Tensor], thread: int) -> None:
    """The optimizer stepped `params` in `thread`: from now on, watch for the reset of those
    that had a gradient (a head the loss never reaches keeps None, which is no reset)."""
    watch = state.of(optimizer)
    still, watch.reset = watch.reset, OpenReset([p for p in params if p.grad is not None], thread)
    if still is not None:  # a step whose start did not close it (another thread's): same place
        watch.reset.opened = still.opened


def replaced(entry: OpenReset) -> bool:
    """None of the gradients carried into the step's first backward is in `.grad` at the
    step: the script set them to None or wrote new ones by hand after that backward
    (GradNorm's task weights, their gradient assigned from `autograd.grad`), so the step
    applies nothing carried. A backward adds into a gradient in place."""
    current = {id(p.grad) for p in entry.params if p.grad is not None}
    return bool(entry.held) and all(id(ref()) not in current for ref in entry.held)


def trained(state: WatchState, optimizer: Any) -> list[torch.Tensor]:
    """The optimizer's parameters that take gradients (cached while its groups keep
    their sizes)."""
    key = tuple(len(g["params"]) for g in optimizer.param_groups)
    watch = state.of(optimizer)
    if watch.trained is None or watch.trained[0] != key:
        params = [p for g in optimizer.param_groups for p in g["params"] if p.requires_grad]
        watch.trained = (key, params)
    return watch.trained[1]


def carried(state: WatchState, optimizer: Any) -> torch.Tensor | None:
    """The smallest gradient norm seen at a backward's start since the optimizer's last
    step, with no reset between (None: a reset, or no backward)."""
    watch = state.of(optimizer)
    entry, watch.reset = watch.reset, None
    if entry is None or entry.reset or replaced(entry):
        return None
    return entry.low


Idle = tuple[str | None, bool, int]
"""(the class of the optimizer, whether its zero_grad() ran, how many times it did)."""
NOT_IDLE: Idle = (None, True, 0)
DROPPED = 0
"""The zero_grad count of an idle optimizer the script dropped before the run ended (a
live one that was zeroed counts at least 1)."""


def idle_holders(state: WatchState, placed: set[int], ended_early: bool) -> dict[int, Idle]:
    """id → the optimizer outside those that stepped (`placed`) holding the tensor: one
    whose zero_grad() ran and whose step() never did, or, in a run that ended early, a
    live one whose turn never came (discover.unstepped_holders). One the script dropped
    since (no longer live) is said with no zero_grad counted: DROPPED."""
    idle: dict[int, Idle] = {
        id(p): (type(o).__name__, True, state.zero_grads.get(id(o), 0))
        for o in state.zeroed.values()
        for g in o.param_groups
        for p in g["params"]
        if id(p) not in placed
    }
    idle.update(
        (k, (name, True, DROPPED))
        for k, name in state.idle_held.items()
        if k not in placed and k not in idle
    )
    if ended_early:
        late = discover.unstepped_holders(state.tracked.params, placed | set(idle))
        idle.update((k, (name, False, 0)) for k, name in late.items())
    return idle
