"""What the hooks keep per thread, so that a script's threads never share a step.

A step's backward calls, clip and GradScaler calls happen in the thread that steps (a
training thread beside an evaluating main thread, two threads each training a model):
each thread has its own `ThreadState`, and nothing one thread begins is finished, reset
or counted by another. The one exception is a helper thread that only runs backward
(a thread pool computing the shards of a batch) and never steps: its `Window` is taken
by the next step, in any thread, of an optimizer whose parameters its backward reached.

Everything the threads share (the step count, the optimizers, the tracked parameters,
the recorder) is changed under `Threads.lock`. A child process forked while another
thread held it gets a fresh one.
"""

from __future__ import annotations

import os
import threading
import weakref
from dataclasses import dataclass, field, replace
from typing import Any

import torch


@dataclass
class Window:
    """The backward calls of one thread since its previous step: its next step's."""

    calls: int = 0
    loss: torch.Tensor | None = None
    """Sum of the values backward ran on (detached, float32 at least)."""
    loss_known: bool = True
    """False once a backward was given explicit gradients or a non-scalar."""
    first: torch.Tensor | None = None
    """The first call's loss (detached): the loss of one forward whose later calls
    reweight it (stepping._loss)."""
    leaves: set[int] = field(default_factory=set)
    """A helper thread's: ids of the leaf tensors its backward calls reach."""
    site: tuple[str, int] | None = None
    """The script's line of the last backward call (backward_sites.py)."""
    loss_kind: Any = None
    """The step's `LossKind`, where it was read (loss_graph.py): the first backward's, and
    the terms of each later backward on another loss added to it."""
    kinds_read: list[Any] = field(default_factory=list)
    """The distinct kinds its backward calls were read as (their terms): a call like one of
    them (the next micro-batch of an accumulation) ends the reading (`kind_done`)."""
    kind_done: bool = False
    micro: Any = None
    """Its micro-batch gradients (noise_scale.MicroWindow); None: none measured."""
    wiped: int = 0
    """Its first backward calls whose gradients a reset cleared before the later ones
    (zero_grad, or `.grad = None` by hand, inside an accumulation loop): the step
    applies none of them."""
    wiped_ids: set[int] = field(default_factory=set)
    """ids of the parameters that reset cleared: a step of other parameters (a GAN's
    other model) lost nothing."""
    wiped_loss: torch.Tensor | None = None
    """Sum of the wiped calls' losses, moved out of `loss` at each reset: `loss` holds the
    calls after the last one, those whose gradients a step can still apply."""
    unreached: list[tuple[frozenset[int], int, torch.Tensor | None]] = field(default_factory=list)
    """(ids of the parameters, calls, loss) at each zero_grad since the last wipe that found
    none of its parameters holding a gradient: an optimizer of those parameters applies
    none of the calls before it (applied.py)."""
    sentinel: Any = None
    """A parameter the window's first backward gave a gradient: None again at a later
    call's start, the script set the gradients to None by hand in between."""
    left: Any = None
    """A weak reference to the sentinel's gradient as the last backward left it (None: it
    had none): another tensor there at the step was written by hand since."""
    left_version: int = -1
    """Its version counter then: moved at the step, the script wrote into it since."""
    last: Any = None
    """That gradient itself, held only after a reset inside the window (a wipe), to compare
    with a tensor written by hand at the step (resets.combined_by_hand)."""
    kept_marks: tuple[tuple[int, int], ...] = ()
    reset_marks: dict[int, tuple[int, int]] = field(default_factory=dict)
    """id of each optimizer → (id, version) of its first gradient
    at the window's first backward and at each reset since: one unchanged at the next
    reset got nothing from the calls between (a scorer's gradients left from before a
    fresh model's steps). Empty where several threads run the hooks."""
    """(id, version) of a gradient of each other optimizer that kept its gradients across
    the window's last reset (kept_grads.kept_by_another)."""
    judged: int = -1
    """The window's calls when a zero_grad between them was last judged (resetting)."""
    retained: int = 0
    """The leading backward calls that kept their graph (retain_graph=True): objectives of
    one forward, each backward in turn, not micro-batches."""
    sentinel_version: int = -1
    """Its version counter then: moved at a reset, the weights were changed in place with
    those gradients before it (a SAM ascent step), so they were used, not wiped."""
    root: Any = None
    """The last backward call's root `grad_fn`: at a reset inside the window, the leaves it
    reached say whose gradient the calls were for (an input's: an attack's, a saliency's)."""
    first_root: Any = None
    """The first call's: reaching an input the last call did not, the step applies the
    parameter gradients of calls made for that input (input_added)."""
    inputs: tuple[tuple[Any, Any, int], ...] = ()
    """(weak reference, gradient id, gradient version) of each input the first call gave a
    gradient, noted at its end on the steps input_checked names; looked at once, at the
    second call's start (resets.inputs_reset)."""
    inputs_reset: bool = False
    """Between the first two calls the script reset or read-and-zeroed an input's
    gradient but not the parameters': the calls were made one at a time for that input
    (a Langevin sampler's or an attack's steps by backward)."""
    eval_roots: frozenset[int] | None = None
    """ids of the watched models in eval mode at the window's first backward: the mode
    its forward ran in (modes.py), whatever the script switched to before the step."""

    def wipe(self, ids: set[int]) -> None:
        """A reset cleared the gradients (of the parameters `ids`) that every call so far
        gave: those calls' loss is set apart from the later calls'."""
        self.wiped, self.wiped_ids = self.calls, ids
        self.unreached = []
        if self.loss is not None:
            self.wiped_loss = self.loss if self.wiped_loss is None else self.wiped_loss + self.loss
            self.loss = None

    def reset_unreached(self, ids: frozenset[int]) -> None:
        """A zero_grad after some calls found none of the parameters `ids` holding a
        gradient (kept: the last few)."""
        self.unreached = [u for u in self.unreached if u[0] != ids][-3:]
        self.unreached.append((ids, self.calls, self.loss))

    def whole_loss(self) -> torch.Tensor | None:
        """Sum of the losses of all its calls, wiped or not."""
        if self.wiped_loss is None or self.loss is None:
            return self.loss if self.wiped_loss is None else self.wiped_loss
        return self.wiped_loss + self.loss

    def shared(self) -> Window:
        """What a second optimizer stepping on these calls applies: their count, loss and
        meaning; their micro-batch norms stay the first step's (one estimate a call)."""
        return replace(self, micro=None)

    def add(self, other: Window) -> None:
        """`other`'s backward calls belong to the same step."""
        self.calls += other.calls
        self.loss_known = self.loss_known and other.loss_known
        loss = other.whole_loss()
        if loss is not None:
            self.loss = loss if self.loss is None else self.loss + loss


@dataclass
class ThreadState:
    """One thread's part of the interception."""

    ident: int
    name: str
    home: bool
    """The thread that started the watch: the one --steps may stop."""
    window: Window = field(default_factory=Window)
    depth: int = 0
    """> 0 inside a backward (or clip) gradscope already counts."""
    quiet: int = 0
    """> 0 inside a closure's second and later evaluations (LBFGS's line search)."""
    stepped: bool = False
    """This thread has stepped an optimizer."""
    pre_clip: torch.Tensor | None = None
    clip_total: torch.Tensor | None = None
    max_norm: float | None = None
    norm_type: float | None = None
    scaled_clip: bool = False
    clip_scale: torch.Tensor | None = None
    clip_params: frozenset[int] | None = None
    """ids of the parameters the clip touched (None: not known): it belongs to the
    optimizers that step them, each once, until the next backward."""
    clip_takers: set[int] = field(default_factory=set)
    """ids of the optimizers whose step the clip was given to."""
    clip_site: str | None = None
    """The script's `file:line` of the clip (clipping.unused)."""
    clip_taken: bool = False
    """A step took the clip since it ran (clipping.unused)."""
    scaled: list[tuple[torch.Tensor, torch.Tensor, Any]] = field(default_factory=list)
    """(scaler.scale's output, its input, the scaler) of the last few scale calls."""
    scaled_by: Any = None
    """The GradScaler whose scale multiplies the gradients of the last backward."""
    scaler_calls: list[list[Any]] = field(default_factory=list)
    zeroed: Window | None = None
    """The window whose gradients a zero_grad cleared after its backward calls and
    before any step or further backward: a step now applies none of them."""
    taken: Window | None = None
    """The window this thread's last step applied, until its next backward: each other
    optimizer stepping on the same backward calls (Muon beside AdamW, SparseAdam beside
    Adam, Pyro's optimizer per parameter) applies them too, and their loss is its loss."""
    taken_by: set[int] = field(default_factory=set)
    """The optimizers (their indices) that stepped on `taken`: one stepping again on it
    applies no new backward call (GS472)."""
    current: Any = None
    """The PendingStep begun and not yet finished."""
    snapshot: tuple[list[torch.Tensor], Any] | None = None
    """A measured step: its parameters and what updates.py took before the update."""
    stepping: Any = None
    """The optimizer whose step (given a closure) has started and not yet begun."""
    scheduling: bool = False
    """Inside an lr scheduler's step: a SequentialLR's own children are not counted."""
    step_depth: int = 0
    """Optimizer steps under way (> 1: a step inside a step)."""

    @property
    def helper(self) -> bool:
        """A thread other than the watch's that has never stepped: its backward calls may
        belong to a step another thread makes."""
        return not self.home and not self.stepped

    def clear_clip(self) -> None:
        self.pre_clip = self.clip_total = self.clip_scale = None
        self.max_norm = self.norm_type = None
        self.scaled_clip = False
        self.clip_params = None
        self.clip_takers = set()
        self.clip_site = None
        self.clip_taken = False


class Threads:
    """The ThreadState of every thread that reached a hook, and the lock they share."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.home = threading.get_ident()
        self.states: dict[int, ThreadState] = {}
        self._local = threading.local()
        _live.add(self)

    def here(self) -> ThreadState:
        state: ThreadState | None = getattr(self._local, "state", None)
        if state is None:
            ident = threading.get_ident()
            state = ThreadState(ident, threading.current_thread().name, ident == self.home)
            self._local.state = state
            with self.lock:
                self.states[ident] = state
        return state

    def alone(self) -> bool:
        """At most one thread has reached a hook. Only then may a hook read the `.grad`
        of every tracked tensor: another thread's backward writes its gradients without
        the GIL, and a read racing that write can crash the process."""
        return len(self.states) <= 1

    def helpers(self, exclude: ThreadState) -> list[ThreadState]:
        """Helper threads (other than `exclude`) with backward calls not yet taken."""
        return [s for s in self.states.values() if s is not exclude and s.helper and s.window.calls]

    def _after_fork(self) -> None:
        self.lock = threading.RLock()  # another thread may have held it: it is not here


_live: weakref.WeakSet[Threads] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for threads in list(_live):
        threads._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
