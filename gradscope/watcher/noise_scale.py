"""Each micro-batch's own gradient norm, for the gradient noise scale (steps/noise.py).

A tensor hook on every tracked parameter sees the gradient one backward call brings
before it is added to `.grad` (the hook runs ahead of the parameter's AccumulateGrad;
a post-accumulate-grad hook would see the running sum). On an accelerator the hook
keeps a reference and nothing else; at the end of the backward call one fused norm
(`measure.norms`) over what was kept gives the call's per-parameter norms, squared and
added on the device into the thread's window: no host sync, and at most HELD_BYTES of
gradients held at once (a larger backward takes its norms in chunks). Where `.grad` was
None before the call (the first micro-batch) the hook keeps nothing: `.grad` after the
call is that gradient (holding it would make autograd copy it), except in a
data-parallel run, whose reduction overwrites `.grad` in the same call. On the CPU the
hook takes the norm at once instead, while the gradient is still in cache: nothing is
held, and a loop of CPU norms is 2-3× faster than the CPU's fused one. The hooks go on
at the end of the first step of several backward calls (at the first step in a
data-parallel run): a run of one backward call per step pays nothing for them.

The numbers are trusted only for a step whose every backward call was measured, came
from the same line of code (a micro-batch loop, not a GAN's two losses), with no reset
of the gradients between them; anything else leaves the step unmeasured. Under
GradScaler the norms are unscaled on the device. The batch size is the one stated, or
read by forward pre-hooks on the models the watch found and on their sequence-first
modules (batch_read.py).
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils.hooks import unserializable_hook

from gradscope.hookable import hookable
from gradscope.watcher.batch_read import Seen, label_of, reading, seen, sequence_first
from gradscope.watcher.discover import Tracked
from gradscope.watcher.measure import accumulation, norms, plain
from gradscope.watcher.same_batch import target_of

HELD_BYTES = 64 << 20
"""The most gradient bytes held between two fused norms inside one backward call."""


@dataclass
class MicroWindow:
    """The micro-batch gradients of one thread's window (threads.Window.micro)."""

    sums: torch.Tensor | None = None
    """[P] Σ over the window's backward calls of each parameter's squared gradient norm."""
    measured: int = 0
    reached: set[int] = field(default_factory=set)
    sites: set[tuple[str, int]] = field(default_factory=set)
    sizes: set[int | None] = field(default_factory=set)
    bad: str | None = None
    targets: list[weakref.ref[torch.Tensor]] = field(default_factory=list)
    """Each call's loss target, not kept alive: a target the script let go is no longer
    there to be read again (one seen twice: the same samples again, `_same_samples`)."""


@dataclass
class _Call:
    """One backward call being measured."""

    window: MicroWindow
    scale: torch.Tensor | None
    held: list[torch.Tensor] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    fresh: list[int] = field(default_factory=list)
    done: list[torch.Tensor] = field(default_factory=list)
    done_positions: list[int] = field(default_factory=list)
    bytes: int = 0
    seen: set[int] = field(default_factory=set)


class MicroGrads:
    """The hooks, and what each window measured."""

    eager_cpu = True
    """CPU norms are taken in the hook (False: as on an accelerator; the tests run both)."""

    def __init__(self, tracked: Tracked, batch_size: int | None = None) -> None:
        self.tracked = tracked
        self.batch_size = batch_size
        self.fresh_ok = True
        """False in a data-parallel run (see the module's docstring)."""
        self.ranks: Callable[[], int] = lambda: 1
        self.current: _Call | None = None
        self._owner = 0
        """The thread whose backward call `current` is."""
        self._active: set[int] = set()
        """Threads inside a top-level backward call: two at once measure nothing."""
        self.last_size: int | None = None
        self.seen: dict[Seen, None] = {}
        """What the sequence-first modules saw since the model's forward began, each once."""
        self.reads: dict[str, None] = {}
        """How the run's micro-batches were counted (or why not), each once, in order."""
        self._seq_hooked: set[int] = set()
        self.wanted = False
        """Hooks go on at the first step with two backward calls, or at once in a
        data-parallel run (whose ranks make each step several micro-batches); a run of
        one backward per step pays nothing."""
        self._hooked = 0
        self._roots: list[int] = []
        self._handles: list[Any] = []
        self._module_hooks: set[int] = set()
        self._index: dict[tuple[int, ...], torch.Tensor] = {}
        self.failed = False
        """A hook of its own failed: the hooks do nothing from then on, no step is
        measured, and the rest of the watch goes on."""
        self.on_fault: Callable[[str, BaseException], None] = lambda part, exc: None

    def attach(self, calls: int) -> None:
        """Hook the parameters and models found since the last call, once wanted (a step
        of `calls` backward calls just began)."""
        self.wanted = self.wanted or calls > 1 or not self.fresh_ok
        if not self.wanted or self.failed:
            return
        params = self.tracked.params
        for pos in range(self._hooked, len(params)):
            if params[pos].requires_grad:
                hook = unserializable_hook(self._hook(pos))  # pickles drop it, silently
                self._handles.append(params[pos].register_hook(hook))
        self._hooked = len(params)
        for root in self.tracked.roots:
            if id(root) not in self._roots:
                self._roots.append(id(root))
                if not hookable(root):
                    continue
                handle = root.register_forward_pre_hook(self._forward, with_kwargs=True)
                self._handles.append(handle)
                self._module_hooks.add(handle.id)
                self._hook_sequence_first(root)

    def _hook_sequence_first(self, root: Any) -> None:
        """A pre-hook on each RNN or attention of `root` that takes [T, B, ...]: its input's
        batch, for `reading`."""
        for name, module in sequence_first(root):
            if id(module) in self._seq_hooked or not hookable(module):
                continue
            self._seq_hooked.add(id(module))
            hook = functools.partial(self._sequence_forward, label_of(name, module))
            handle = module.register_forward_pre_hook(hook, with_kwargs=True)
            self._handles.append(handle)
            self._module_hooks.add(handle.id)

    def _sequence_forward(self, label: str, module: Any, args: Any, kwargs: Any) -> None:
        if self.failed or torch.jit.is_tracing():  # torch.jit.trace's pass: not a batch
            return
        try:
            found = seen(label, args, kwargs)
            if found is not None:
                self.seen.setdefault(found)
        except Exception as exc:
            self._fail("the noise scale's forward pre-hook", exc)

    def wrap_getstate(self, original: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """`nn.Module.__getstate__` while watched: a model pickled or deep-copied by the
        script (torch.save(model), an EMA copy) carries none of these hooks."""

        def __getstate__(module: Any) -> Any:
            state = original(module)
            if not self._module_hooks or not isinstance(state, dict):
                return state
            for key in ("_forward_pre_hooks", "_forward_pre_hooks_with_kwargs"):
                hooks = state.get(key)
                if hooks and any(k in self._module_hooks for k in hooks):
                    state[key] = type(hooks)(
                        (k, v) for k, v in hooks.items() if k not in self._module_hooks
                    )
            return state

        return __getstate__

    def module_hook_ids(self) -> frozenset[int]:
        """The ids of its forward pre-hooks on modules (a copy or a ScriptModule drops them)."""
        return frozenset(self._module_hooks)

    def remove(self) -> None:
        while self._handles:
            self._handles.pop().remove()
        self.current = None

    def _fail(self, part: str, exc: BaseException) -> None:
        """A hook failed: the noise scale is switched off (its hooks stay until the watch
        ends, doing nothing: a hook removed while autograd runs its neighbours would
        change the dictionary they are read from)."""
        self.failed = True
        self.current = None
        self.on_fault(part, exc)

    def _forward(self, module: Any, args: Any, kwargs: Any) -> None:
        if self.failed or torch.jit.is_tracing():  # torch.jit.trace's pass: not a batch
            return
        try:
            self._batch_size(args, kwargs)
        except Exception as exc:
            self._fail("the noise scale's forward pre-hook", exc)

    def _batch_size(self, args: Any, kwargs: Any) -> None:
        first = next(
            (a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor) and a.dim()),
            None,
        )
        self.last_size = int(first.shape[0]) if first is not None else None
        self.seen = {}

    def _hook(self, pos: int) -> Callable[[torch.Tensor], None]:
        def hook(grad: torch.Tensor) -> None:
            if self.failed or self.current is None:
                return
            try:
                self._take(pos, grad)
            except Exception as exc:
                self._fail("the noise scale's gradient hook", exc)

        return hook

    def _take(self, pos: int, grad: torch.Tensor) -> None:
        """One parameter's gradient of the call being measured."""
        call = self.current
        if call is None:
            return
        if pos in call.seen:  # two gradients in one call (a reentrant checkpoint)
            call.window.bad = "a parameter got two gradients in one backward call"
            return
        call.seen.add(pos)
        if pos in call.window.reached and self.tracked.params[pos].grad is None:
            call.window.bad = "gradients were reset between micro-batches"
        if callable(getattr(grad, "to_local", None)):  # a shard: its norm is not the whole's
            call.window.bad = "sharded (DTensor) gradients"
            return
        if self.eager_cpu and grad.is_cpu:  # now, while in cache
            call.done.append(_cpu_norm(grad))
            call.done_positions.append(pos)
            return
        if self.fresh_ok and self.tracked.params[pos].grad is None:
            call.fresh.append(pos)
            return
        call.held.append(grad)
        call.positions.append(pos)
        call.bytes += grad.numel() * grad.element_size()
        if call.bytes > HELD_BYTES:
            self._norm_held(call)

    @staticmethod
    def _norm_held(call: _Call) -> None:
        if call.held:
            call.done += norms(call.held)
            call.done_positions += call.positions
        call.held, call.positions, call.bytes = [], [], 0

    # -- one backward call ------------------------------------------------------------
    def begin(self, window: Any, scaler: Any, root: torch.Tensor | None = None) -> None:
        """A top-level backward call of `root` (None: several) starts in the thread whose
        window this is."""
        if self._hooked == 0 or self.failed:
            return
        micro = window.micro
        if micro is None:
            micro = window.micro = MicroWindow()
        me = threading.get_ident()
        self._active.add(me)
        if len(self._active) > 1:  # another thread's call is under way: its hooks fire too
            micro.bad = "backward calls ran at the same time"
            if self.current is not None:
                self.current.window.bad = micro.bad
            self.current = None
            return
        micro.sites.add(window.site)  # the line backward_calls.started read
        if _same_samples(micro, root):
            micro.bad = "the micro-batches' losses read the same targets: the same samples"
        size, how = reading(self.batch_size, self.last_size, self.seen)
        micro.sizes.add(size)
        if how is not None:
            self.reads.setdefault(how)
        self.last_size, self.seen = None, {}
        scale = getattr(scaler, "_scale", None) if scaler is not None else None
        enabled = scaler is not None and scaler.is_enabled()
        self.current = _Call(micro, scale if enabled and isinstance(scale, torch.Tensor) else None)
        self._owner = me

    def end(self) -> None:
        """The call ended: its per-parameter squared norms, added on the device."""
        me = threading.get_ident()
        self._active.discard(me)
        call = self.current
        if call is None or self._owner != me:
            return
        self.current = None
        if call.window.bad:
            return
        params = self.tracked.params
        fresh = [(i, params[i].grad) for i in call.fresh]
        fresh_grads = [g for _, g in fresh if g is not None]
        call.held += fresh_grads
        call.positions += [i for i, g in fresh if g is not None]
        self._norm_held(call)
        micro = call.window
        micro.measured += 1
        if not call.done:
            return
        values = torch.stack(call.done)
        squares = values.to(accumulation(values.device)).square()
        if call.scale is not None:
            squares = squares / call.scale.to(squares.dtype).square()
        key = tuple(call.done_positions)
        index = self._index.get(key)
        if index is None or index.device != squares.device:
            index = self._index[key] = torch.tensor(key, device=squares.device)
        width = len(params)
        if micro.sums is None or micro.sums.numel() < width:
            grown = torch.zeros(width, dtype=squares.dtype, device=squares.device)
            if micro.sums is not None:
                grown[: micro.sums.numel()] = micro.sums
            micro.sums = grown
        micro.sums.index_add_(0, index, squares)
        micro.reached.update(key)

    def reset(self, window: Any, params: Callable[[], Any]) -> None:
        """A zero_grad between micro-batches: the sums no longer add up to `.grad`."""
        micro = window.micro
        if micro is None or not micro.reached:
            return
        index = self.tracked.index
        if any(index.get(id(p)) in micro.reached for p in params()):
            micro.bad = "gradients were reset between micro-batches"

    def take(self, window: Any) -> tuple[torch.Tensor, int, int, int | None] | None:
        """(per-parameter sums, backward calls, DDP ranks, micro-batch samples) of a
        window whose every call was measured alike; None otherwise."""
        micro = window.micro
        calls = window.calls
        if self.failed or micro is None or micro.bad or micro.sums is None:
            return None
        if micro.measured != calls:
            return None
        ranks = self.ranks()
        if len(micro.sites) != 1 or calls * ranks < 2:
            return None
        size = next(iter(micro.sizes)) if len(micro.sizes) == 1 else None
        return micro.sums, calls, ranks, size


def _same_samples(micro: MicroWindow, root: torch.Tensor | None) -> bool:
    """This call's loss compares against the very target tensor an earlier call of the
    window did: the calls are not independent micro-batches but the same samples again (an
    online learner's backward at every time step of one batch of sequences, each against
    the sequences' labels), which B_simple cannot read."""
    found = target_of(getattr(root, "grad_fn", None))
    if found is None:
        return False
    target = found[1]
    if any(held() is target for held in micro.targets):
        return True
    micro.targets.append(weakref.ref(target))
    return False


def _cpu_norm(grad: torch.Tensor) -> torch.Tensor:
    """One CPU gradient's L2 norm, float32 at least (a loop of these reads memory faster
    than the CPU's `_foreach_norm`); an overflow is inf, which the estimate refuses."""
    t = plain(grad)
    wide = t.dtype in (torch.float32, torch.float64)
    return torch.linalg.vector_norm(t, dtype=None if wide else torch.float32)
