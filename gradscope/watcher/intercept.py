"""The interception: global hooks and class-level wrappers, all undone by `remove`.

- `torch.optim.optimizer.register_optimizer_step_pre_hook/_post_hook`: every step of
  any Optimizer (plain loops, HF Trainer, Lightning, accelerate), no per-instance patch.
  A step given a closure (`optimizer.step(closure)`: LBFGS, Lightning's automatic
  optimization) gets the closure wrapped by the pre-hook: the step's statistics are
  taken when its first evaluation returns (its loss, the gradients it left, a clip
  it did), not before the closure ran; LBFGS's further evaluations count only in the
  run's backward calls.
- `Tensor.backward` / `torch.autograd.backward`: the loss and the number of backward
  calls per step (gradient accumulation); the nested backward of a reentrant
  checkpoint is not counted. At each top-level backward's start, for every optimizer
  whose last step has not been followed by a reset of its gradients yet, whether its
  gradients are still all there (`p.grad is None` checks; a device norm only when they
  all are): the carried-over norm of its next step.
- `Optimizer.zero_grad`, `Module.zero_grad`: a reset seen, with no norm to take.
- `torch.nn.utils.clip_grad_norm_`, `get_total_norm`, `clip_grads_with_norm_`:
  the norm before clipping, the script's own value in its norm type, and max_norm.
  Replaced in the modules before the script imports them. A clip of gradients still
  multiplied by GradScaler's scale (the backward was on `scaler.scale(loss)` and
  `scaler.unscale_(optimizer)` has not run since) is marked `scaled_clip`, and its
  norms are divided by the scale (a device tensor) so that every number is unscaled.
- `GradScaler.scale` / `step` (class level): the unscaled loss, the loss scale,
  and skipped steps. A non-fused optimizer's step hooks do not fire on a skipped
  step (the step wrapper notices); a fused one's fire on every step with
  `optimizer.found_inf` and, unless `unscale_` ran, `optimizer.grad_scale` set and
  the gradients still scaled, which the measurement divides out.
- Updates by hand (no optimizer ever stepped: `p.data.add_(p.grad, alpha=-lr)`,
  `p -= lr * p.grad` under no_grad): at the end of each top-level backward the
  gradients are measured (the script often zeroes them right after updating) and the
  weights fingerprinted (version counters and float64 norms: `.data` writes bump no
  version); at the next backward's start, or when the watch ends, a changed
  fingerprint is a step of the `records.MANUAL` optimizer. Deciding that reads one
  small vector back per backward, a cost paid only while no optimizer has stepped.
- A thread's first step: its backward calls are those since its thread's last reset of
  gradients that held something (zero_grad of an optimizer or a module, or the
  gradients the first backward reached all set to None by hand), so backward-only
  iterations before an optimizer exists (a warm-up, a gradient statistic) are not
  counted into its loss; backward calls whose gradients are still there when it steps
  (accumulation across its creation) are. Later steps: those since the previous step.
- Threads (threads.py): a step made in any thread is a real step, recorded under the
  optimizer that made it, with the backward calls, clip and loss scale of that thread
  since its previous step; the steps of all threads are numbered in the order they
  end. Backward calls in a thread that never steps (a pool computing shards) go to
  the next step of an optimizer whose parameters they reached. A step reads no
  gradient of a parameter another thread steps: reading `p.grad` while another thread
  sets it to None (zero_grad) and frees it crashes torch. Nothing is raised in a
  thread other than the watching one: a failure of gradscope's own there stops the
  recording with a note, and --steps reached there stops the recording, and the script
  at the next hook its watching thread reaches.

- From the first step on, a tensor hook on each tracked parameter and a forward pre-hook
  on each model found (noise_scale.py): each micro-batch's gradient norm and batch size,
  for the gradient noise scale; zero_grad between micro-batches is noted there, and
  `nn.Module.__getstate__` leaves the hook out of a model the script pickles or copies.

Nothing else here reads a value back to the host: see recorder.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import torch

from gradscope.watcher import discover, loss_graph, updates
from gradscope.watcher.measure import Measure, norms
from gradscope.watcher.noise_scale import MicroGrads
from gradscope.watcher.optim_settings import SettingsHistory
from gradscope.watcher.recorder import PendingStep, Recorder
from gradscope.watcher.threads import Threads, ThreadState, Window

T = TypeVar("T")


NO_CLIP = ThreadState(0, "no clip", False)
"""The clip fields of a thread that has not clipped: what a step the clip is not for gets."""

LOSS_KIND_EVERY = 100
"""The loss's graph is read at the first backward of steps 1-3, 101-103, ...: a few
dozen nodes, and a loss that changes its kind mid-run is still seen."""


class StopWatching(BaseException):
    """Raised after the last step asked for (--steps); a BaseException so that the
    script's own `except Exception` lets it through."""


class ManualUpdates:
    """Stands in `Interceptor.optimizers` for parameter updates made by hand."""

    def __init__(self) -> None:
        self.param_groups: list[dict[str, Any]] = [{"params": []}]


@dataclass
class _Reset:
    """Since an optimizer's last step: a reset of its gradients seen, or the norms of
    its gradients found at the start of each backward of the thread that stepped it."""

    params: list[torch.Tensor]
    thread: int
    reset: bool = False
    norms: list[torch.Tensor] = field(default_factory=list)


@dataclass
class _Manual:
    """What the last backward left, for an update by hand that may follow it."""

    params: list[torch.Tensor]
    thread: int
    """The thread whose backward found them: the only one that checks."""
    weights: torch.Tensor | None = None
    versions: list[int] = field(default_factory=list)
    grads: torch.Tensor | None = None
    members: tuple[int, ...] = ()
    loss: torch.Tensor | None = None
    loss_known: bool = True
    calls: int = 0
    before: updates.Before | None = None
    """Measured steps: what the update is measured from (updates.py)."""
    kind: Any = None
    """The `LossKind` of the backward calls, where it was read."""
    pending: bool = False
    """A backward ended since the last check."""


class Interceptor:
    """The state the hooks share while one run is watched."""

    def __init__(
        self,
        recorder: Recorder,
        update_every: int = 25,
        max_steps: int | None = None,
        batch_size: int | None = None,
    ) -> None:
        self.recorder = recorder
        self.update_every = max(1, update_every)
        self.max_steps = max_steps
        self.start = time.perf_counter()
        self.tracked = discover.Tracked()
        self.optimizers: list[Any] = []
        """The optimizers that stepped, by index (a `ManualUpdates` for updates by hand)."""
        self.known: list[torch.optim.Optimizer] = []
        """Those and the ones found owning clipped parameters before their first step."""
        self.discovered = False
        self.steps = 0
        self.backward_total = 0
        """backward() calls over the whole run."""
        self.notes: list[str] = []
        """What the watch could not do, for the report."""
        self.manually_updated: set[int] = set()
        """Positions of the parameters an update by hand changed."""
        self.stopped = False
        """--steps reached: nothing more is recorded."""
        self.threads = Threads()
        self._off = False
        """Removed, or failed: every hook only calls what it wraps."""
        self._undo: list[Callable[[], None]] = []
        self.measure = Measure(self.tracked)
        self.updates = updates.Updates(self.measure, self.notes)
        self.noise = MicroGrads(self.tracked, batch_size)
        """Each micro-batch's gradient norm: the noise scale's small batch."""
        self._resets: dict[int, _Reset] = {}
        self._trained_cache: dict[int, tuple[tuple[int, ...], list[torch.Tensor]]] = {}
        self._stepped_by: dict[int, set[int]] = {}
        """Optimizer index → the threads that stepped it."""
        self._manual: _Manual | None = None
        self._manual_index: int | None = None
        self._manual_scanned = False
        self._nan_noted = False
        self._optimizer_stepped = False
        self.settings = SettingsHistory()
        self.loss_kinds: dict[int, Any] = {}
        """Optimizer index → the `LossKind` of its first step whose loss was read."""
        self.first_weights: torch.Tensor | None = None
        """Norms of the tracked weights before the first update (device tensor)."""

    # -- installation -----------------------------------------------------------------
    def install(self) -> None:
        from torch.optim.optimizer import (
            register_optimizer_step_post_hook,
            register_optimizer_step_pre_hook,
        )

        pre = register_optimizer_step_pre_hook(self._pre_step)
        post = register_optimizer_step_post_hook(self._post_step)
        self._undo += [pre.remove, post.remove]
        self._patch(torch.Tensor, "backward", self._wrap_tensor_backward)
        self._patch(torch.autograd, "backward", self._wrap_autograd_backward)
        self._patch(torch.optim.Optimizer, "zero_grad", self._wrap_optimizer_zero_grad)
        self._patch(torch.nn.Module, "zero_grad", self._wrap_module_zero_grad)
        self._patch(torch.nn.Module, "__getstate__", self.noise.wrap_getstate)
        import torch.nn.utils as utils
        import torch.nn.utils.clip_grad as clip_grad

        for module in (utils, clip_grad):
            self._patch(module, "clip_grad_norm_", self._wrap_clip)
        if hasattr(utils, "get_total_norm"):
            self._patch(utils, "get_total_norm", self._wrap_total_norm)
        if hasattr(utils, "clip_grads_with_norm_"):
            self._patch(utils, "clip_grads_with_norm_", self._wrap_clip_with_norm)
        scaler = torch.amp.GradScaler
        self._patch(scaler, "scale", self._wrap_scale)
        self._patch(scaler, "step", self._wrap_scaler_step)

    def remove(self) -> None:
        """Undo every hook and wrapper; a thread still inside one records nothing more."""
        with self.threads.lock:
            self._off = True
        self.noise.remove()
        while self._undo:
            self._undo.pop()()

    def _patch(self, owner: Any, name: str, make: Callable[[Any], Any]) -> None:
        original = owner.__dict__[name]
        setattr(owner, name, make(original))
        self._undo.append(lambda: setattr(owner, name, original))

    # -- the way into every hook ------------------------------------------------------
    def _enter(self) -> ThreadState | None:
        """This thread's state; None when nothing is to be recorded. Once --steps is
        reached, the watching thread stops here at its next hook."""
        if self._off:
            return None
        if self.stopped:
            if self.threads.here().home:
                raise StopWatching()
            return None
        return self.threads.here()

    def _safely(self, here: ThreadState, work: Callable[[], T]) -> T | None:
        """Run gradscope's part of a hook under the shared lock. In a thread other than
        the watching one nothing of gradscope's is raised: a failure stops the recording,
        with a note (in the watching thread it ends the run as before: a rank's timeout
        must). --steps reached stops the watching thread here, and no other."""
        with self.threads.lock:
            if self._off:
                return None
            try:
                out = work()
            except Exception as exc:
                if here.home:
                    raise
                self._off = True
                self.notes.append(
                    f"recording stopped after step {self.steps}: gradscope failed in "
                    f"thread {here.name!r}: {type(exc).__name__}: {exc}".rstrip(": ")
                )
                return None
        if self.stopped and here.home:
            raise StopWatching()
        return out

    # -- backward ---------------------------------------------------------------------
    def _wrap_tensor_backward(self, original: Any) -> Any:
        def backward(tensor: torch.Tensor, gradient: Any = None, *args: Any, **kw: Any) -> Any:
            here = self._enter()
            if here is None or here.depth:
                return original(tensor, gradient, *args, **kw)
            self._safely(here, lambda: self._on_backward(here, [tensor], tensor, gradient))
            here.depth += 1
            try:
                out = original(tensor, gradient, *args, **kw)
            finally:
                here.depth -= 1
            self._safely(here, lambda: self._after_backward(here, [tensor]))
            return out

        return backward

    def _wrap_autograd_backward(self, original: Any) -> Any:
        def backward(tensors: Any, grad_tensors: Any = None, *args: Any, **kw: Any) -> Any:
            here = self._enter()
            if here is None or here.depth:
                return original(tensors, grad_tensors, *args, **kw)
            roots = [tensors] if isinstance(tensors, torch.Tensor) else list(tensors)
            roots = [t for t in roots if isinstance(t, torch.Tensor)]
            single = roots[0] if len(roots) == 1 else None
            self._safely(here, lambda: self._on_backward(here, roots, single, grad_tensors))
            here.depth += 1
            try:
                out = original(tensors, grad_tensors, *args, **kw)
            finally:
                here.depth -= 1
            self._safely(here, lambda: self._after_backward(here, roots))
            return out

        return backward

    def _on_backward(
        self,
        here: ThreadState,
        roots: list[torch.Tensor],
        tensor: torch.Tensor | None,
        gradient: Any,
    ) -> None:
        self.backward_total += 1
        if here.quiet:
            return
        if here.step_depth and here.stepping is None:
            self._drop_unfinished(here)  # a step that raised (its post-hook never ran)
        manual = self._manual
        if manual is not None and manual.pending and manual.thread == here.ident:
            self._guarded(lambda: self._check_manual(here))
        self._observe_resets(here)
        window = here.window
        if window.calls and not here.stepped and self._reset_by_hand(here):
            window = here.window = Window()  # grads set to None by hand since
        if window.calls == 0:  # a norm taken after the last step (a log) is no clip
            here.clear_clip()
        here.zeroed = None  # a backward after the zero_grad: the usual order
        window.calls += 1
        if here.helper:
            window.leaves.update(id(t) for t in discover.graph_leaves(roots))
        scaled = next((x for x in here.scaled if x[0] is tensor), None)
        here.scaled_by = None if scaled is None else scaled[2]
        self.noise.begin(window, here.scaled_by)
        if tensor is None or gradient is not None or tensor.numel() != 1:
            window.loss_known = False
            return
        loss = tensor if scaled is None else scaled[1]
        if window.calls == 1 and self.steps % LOSS_KIND_EVERY < 3:
            window.loss_kind = loss_graph.read(loss, scaled is not None)
        value = loss.detach()
        if value.dtype not in (torch.float32, torch.float64):
            value = value.float()  # a half-precision loss summed over micro-batches
        window.loss = value if window.loss is None else window.loss + value

    def _after_backward(self, here: ThreadState, roots: list[torch.Tensor]) -> None:
        self.noise.end()
        idle = here.current is None and here.stepping is None
        if not self._optimizer_stepped and not here.quiet and idle:
            manual = self._manual
            if manual is None or manual.thread == here.ident:
                self._guarded(lambda: self._manual_backward_end(here, roots))

    def _guarded(self, check: Callable[[], None]) -> None:
        """The search for updates by hand runs in every script: should it ever fail, it
        stops, with a note, and the script runs on."""
        try:
            check()
        except Exception as exc:
            self._manual, self._manual_scanned = None, True
            self.notes.append(
                f"updates by hand are not watched: {type(exc).__name__}: {exc}".rstrip(": ")
            )

    def _members(self, optimizer: Any) -> tuple[int, ...]:
        return self.tracked.members(optimizer)

    def _foreign(self, here: ThreadState, index: int | None = None) -> frozenset[int]:
        """Positions of the parameters another thread steps (and optimizer `index` does
        not): their gradients are not this thread's to read."""
        others = [i for i, by in self._stepped_by.items() if by - {here.ident} and i != index]
        if not others:
            return frozenset()
        own = set(self._members(self.optimizers[index])) if index is not None else set()
        return frozenset(
            p for i in others for p in self._members(self.optimizers[i]) if p not in own
        )

    # -- the backward calls of a first step ---------------------------------------------
    def _reset_by_hand(self, here: ThreadState) -> bool:
        """Before this thread's first step: the gradients its first backward reached were
        all set to None since (the script resets them itself)."""
        manual = self._manual
        if manual is None or manual.thread != here.ident:
            return False
        return all(p.grad is None for p in manual.params)

    def _resetting(self, here: ThreadState, params: Callable[[], Any]) -> None:
        """A zero_grad is about to run: when it clears gradients that are there, the
        backward calls before it belong to no step (this thread's, before its first
        step; a helper thread's whose backward reached them)."""
        helpers = self.threads.helpers(here)
        if not helpers and not here.window.calls:
            return
        present = {id(p) for p in params() if p.grad is not None}
        if not present:
            return
        if here.window.calls:
            here.zeroed = here.window
        if not here.stepped:
            here.window = Window()
        for helper in helpers:
            if helper.window.leaves & present:
                helper.window = Window()

    def _window_of(self, here: ThreadState, optimizer: Any) -> Window:
        """The step's backward calls: this thread's since its previous step, and those of
        helper threads whose backward reached the optimizer's parameters (taken)."""
        helpers = self.threads.helpers(here)
        if not helpers:
            return here.window
        ids = {id(p) for g in optimizer.param_groups for p in g["params"]}
        window = Window(here.window.calls, here.window.loss, here.window.loss_known)
        for helper in helpers:
            if helper.window.leaves & ids:
                window.add(helper.window)
                helper.window = Window()
        return window

    # -- gradients not reset ------------------------------------------------------------
    def _observe_resets(self, here: ThreadState) -> None:
        """At a backward's start: each optimizer this thread stepped whose gradients were
        not reset since its step either has one of them None now (a reset) or gets their
        norm noted. Another thread's gradients are never read."""
        for entry in self._resets.values():
            if entry.reset or entry.thread != here.ident:
                continue
            grads = [p.grad for p in entry.params]
            present = [g for g in grads if g is not None]
            if len(present) < len(grads):
                entry.reset, entry.norms = True, []
            elif present:
                entry.norms.append(torch.linalg.vector_norm(torch.stack(norms(present))))

    def _wrap_optimizer_zero_grad(self, original: Any) -> Any:
        def zero_grad(optimizer: Any, *args: Any, **kw: Any) -> Any:
            here = self._enter()
            if here is None:
                return original(optimizer, *args, **kw)

            def params() -> Any:
                return (p for g in optimizer.param_groups for p in g["params"])

            self._safely(here, lambda: self._resetting(here, params))
            self._safely(here, lambda: self.noise.reset(here.window, params))
            out = original(optimizer, *args, **kw)
            self._safely(here, lambda: self._reset_seen(optimizer))
            return out

        return zero_grad

    def _reset_seen(self, optimizer: Any) -> None:
        entry = self._resets.get(id(optimizer))
        if entry is not None:
            entry.reset, entry.norms = True, []

    def _wrap_module_zero_grad(self, original: Any) -> Any:
        def zero_grad(module: Any, *args: Any, **kw: Any) -> Any:
            here = self._enter()
            if here is None:
                return original(module, *args, **kw)
            self._safely(here, lambda: self._resetting(here, module.parameters))
            self._safely(here, lambda: self.noise.reset(here.window, module.parameters))
            out = original(module, *args, **kw)
            self._safely(here, lambda: self._module_reset(module))
            return out

        return zero_grad

    def _module_reset(self, module: Any) -> None:
        open_ = [e for e in self._resets.values() if not e.reset]
        if open_:
            ids = {id(p) for p in module.parameters()}
            for entry in open_:
                if all(id(p) in ids for p in entry.params):
                    entry.reset, entry.norms = True, []

    def _trained(self, optimizer: Any) -> list[torch.Tensor]:
        """The optimizer's parameters that take gradients (cached while its groups keep
        their sizes)."""
        key = tuple(len(g["params"]) for g in optimizer.param_groups)
        cached = self._trained_cache.get(id(optimizer))
        if cached is None or cached[0] != key:
            params = [p for g in optimizer.param_groups for p in g["params"] if p.requires_grad]
            cached = self._trained_cache[id(optimizer)] = (key, params)
        return cached[1]

    def _carried(self, optimizer: Any) -> torch.Tensor | None:
        entry = self._resets.pop(id(optimizer), None)
        if entry is None or entry.reset or not entry.norms:
            return None
        if len(entry.norms) == 1:
            return entry.norms[0]
        return torch.stack(entry.norms).min()

    # -- clipping ---------------------------------------------------------------------
    def _wrap_clip(self, original: Any) -> Any:
        def clip_grad_norm_(
            parameters: Any, max_norm: float, norm_type: float = 2.0, *a: Any, **kw: Any
        ) -> Any:
            here = self._enter()
            if here is None or here.depth or here.quiet:
                return original(parameters, max_norm, norm_type, *a, **kw)
            params = [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)
            scale = self._safely(here, lambda: self._before_clip(here, params))
            here.depth += 1
            try:
                total = original(params, max_norm, norm_type, *a, **kw)
            finally:
                here.depth -= 1
            self._safely(
                here, lambda: self._clipped(here, total, float(norm_type), float(max_norm), scale)
            )
            return total

        return clip_grad_norm_

    def _before_clip(self, here: ThreadState, params: list[torch.Tensor]) -> torch.Tensor | None:
        """The norms before the clip changes them; the loss scale they still carry."""
        self._ensure_discovered(params)
        here.clip_params = frozenset(id(p) for p in params) or None  # none: not known
        scale = self._clip_scale(here, params)
        here.pre_clip = self._unscaled(self.measure.grads(self._foreign(here)), scale)
        return scale

    def _wrap_total_norm(self, original: Any) -> Any:
        def get_total_norm(tensors: Any, norm_type: float = 2.0, *a: Any, **kw: Any) -> Any:
            here = self._enter()
            if here is None or here.depth or here.quiet:
                return original(tensors, norm_type, *a, **kw)
            tensors = [tensors] if isinstance(tensors, torch.Tensor) else list(tensors)
            total = original(tensors, norm_type, *a, **kw)
            self._safely(here, lambda: self._total_norm(here, tensors, total, float(norm_type)))
            return total

        return get_total_norm

    def _total_norm(
        self, here: ThreadState, tensors: list[torch.Tensor], total: Any, norm_type: float
    ) -> None:
        ids = {id(t) for t in tensors}
        foreign = self._foreign(here)
        params = [
            p for i, p in enumerate(self.tracked.params) if i not in foreign and id(p.grad) in ids
        ]
        here.clip_params = frozenset(id(p) for p in params) or None  # none: not known
        self._clipped(here, total, norm_type, None, self._clip_scale(here, params))

    def _wrap_clip_with_norm(self, original: Any) -> Any:
        def clip_grads_with_norm_(
            parameters: Any, max_norm: float, total_norm: Any, *a: Any, **kw: Any
        ) -> Any:
            here = self._enter()
            if here is not None and here.depth == 0 and not here.quiet:
                params = [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)
                self._safely(here, lambda: self._given_norm(here, params, max_norm, total_norm))
                parameters = params
            return original(parameters, max_norm, total_norm, *a, **kw)

        return clip_grads_with_norm_

    def _given_norm(
        self, here: ThreadState, params: list[torch.Tensor], max_norm: float, total_norm: Any
    ) -> None:
        scale = self._before_clip(here, params)
        if here.clip_total is None:  # no get_total_norm seen: the given total
            self._clipped(here, total_norm, 2.0, float(max_norm), scale)
        here.max_norm = float(max_norm)

    def _clipped(
        self,
        here: ThreadState,
        total: Any,
        norm_type: float,
        max_norm: float | None,
        scale: torch.Tensor | None,
    ) -> None:
        if isinstance(total, torch.Tensor):
            total = total.detach()
            here.clip_total = total if scale is None else total / scale
        here.norm_type = norm_type
        if max_norm is not None:
            here.max_norm = max_norm
        if scale is not None:
            here.scaled_clip, here.clip_scale = True, scale
        current = here.current
        if current is not None:  # a clip inside the step, after its closure ran
            current.grad_norm, current.norm_type = here.clip_total, here.norm_type
            current.max_norm = here.max_norm
            current.scaled_clip, current.clip_scale = here.scaled_clip, here.clip_scale

    def _clip_scale(self, here: ThreadState, params: list[torch.Tensor]) -> torch.Tensor | None:
        """The loss scale the gradients of `params` are still multiplied by: their last
        backward was on a GradScaler's output and `unscale_` has not run since for any
        optimizer that owns them. None: they are not scaled."""
        scaler = here.scaled_by
        if scaler is None or not scaler.is_enabled():
            return None
        scale = getattr(scaler, "_scale", None)
        if not isinstance(scale, torch.Tensor):
            return None
        from torch.amp.grad_scaler import OptState

        states = getattr(scaler, "_per_optimizer_states", {})
        ids = {id(p) for p in params}
        owners = [
            o for o in self.known if any(id(p) in ids for g in o.param_groups for p in g["params"])
        ]
        candidates = [states.get(id(o)) for o in owners] if owners else list(states.values())
        if any(s is not None and s.get("stage") is OptState.UNSCALED for s in candidates):
            return None
        return scale.detach().clone()  # a device tensor: no sync

    @staticmethod
    def _unscaled(norms_: torch.Tensor, scale: torch.Tensor | None) -> torch.Tensor:
        if scale is None:
            return norms_
        return torch.where(norms_ >= 0, norms_ / scale.to(norms_.dtype), norms_)

    # -- GradScaler -------------------------------------------------------------------
    def _wrap_scale(self, original: Any) -> Any:
        def scale(scaler: Any, outputs: Any) -> Any:
            out = original(scaler, outputs)
            here = self._enter()
            if here is not None and isinstance(outputs, torch.Tensor) and out is not outputs:
                here.scaled = [*here.scaled[-3:], (out, outputs, scaler)]
            return out

        return scale

    def _wrap_scaler_step(self, original: Any) -> Any:
        def step(scaler: Any, optimizer: Any, *args: Any, **kw: Any) -> Any:
            here = self._enter()
            if here is None:
                return original(scaler, optimizer, *args, **kw)
            call = [scaler, optimizer, False]
            here.scaler_calls.append(call)
            try:
                out = original(scaler, optimizer, *args, **kw)
                if scaler.is_enabled() and not call[2]:  # the optimizer's hooks never ran
                    self._safely(here, lambda: self._skipped(here, optimizer))
            finally:
                here.scaler_calls = [c for c in here.scaler_calls if c is not call]
            return out

        return step

    def _skipped(self, here: ThreadState, optimizer: Any) -> None:
        self._begin(here, optimizer, skipped=True)
        self._finish(here, optimizer)

    def _scaler_for(self, here: ThreadState, optimizer: Any) -> Any:
        for call in reversed(here.scaler_calls):
            if call[1] is optimizer:
                call[2] = True  # the step (or the skip) is being recorded
                return call[0] if call[0].is_enabled() else None
        return None

    # -- optimizer steps --------------------------------------------------------------
    @staticmethod
    def _drop_unfinished(here: ThreadState) -> None:
        here.current, here.snapshot, here.stepping = None, None, None
        here.step_depth = 0

    def _pre_step(self, optimizer: Any, args: Any, kwargs: Any) -> Any:
        here = self._enter()
        if here is None:
            return None
        here.step_depth += 1
        if here.step_depth > 1 or here.quiet:
            return None  # a step inside a step (super().step(), a wrapped optimizer)
        closure, where = _closure(args, kwargs)
        if closure is None:
            self._safely(here, lambda: self._begin(here, optimizer, skipped=False))
            return None
        wrapped = self._wrap_closure(here, optimizer, closure)
        if where == "kwargs":
            return args, {**kwargs, "closure": wrapped}
        return (args[0], wrapped, *args[2:]), kwargs

    def _wrap_closure(
        self, here: ThreadState, optimizer: Any, closure: Callable[..., Any]
    ) -> Callable[..., Any]:
        evaluations = [0]

        def closure_(*a: Any, **kw: Any) -> Any:
            evaluations[0] += 1
            if evaluations[0] > 1 or here.current is not None:
                here.quiet += 1
                try:
                    return closure(*a, **kw)
                finally:
                    here.quiet -= 1
            try:
                out = closure(*a, **kw)
            except BaseException:
                here.stepping = None
                raise
            self._safely(here, lambda: self._begin(here, optimizer, skipped=False, returned=out))
            return out

        here.stepping = optimizer
        return closure_

    def _post_step(self, optimizer: Any, args: Any, _kwargs: Any) -> None:
        here = self._enter()
        if here is None:
            return
        here.step_depth = max(0, here.step_depth - 1)
        if here.step_depth or here.quiet:
            return  # the end of a step inside a step: the outer one's end records it
        self._safely(here, lambda: self._end_step(here, optimizer))

    def _end_step(self, here: ThreadState, optimizer: Any) -> None:
        if here.current is None:
            self._begin(here, optimizer, skipped=False)  # a closure that was never evaluated
        self._finish(here, optimizer)

    def _index_of(self, optimizer: Any) -> int:
        return next((i for i, o in enumerate(self.optimizers) if o is optimizer), -1)

    def _ensure_discovered(self, params: list[torch.Tensor]) -> None:
        """Before the first step: the optimizers that own the parameters being clipped."""
        if self.discovered:
            return
        self.discovered = True
        ids = {id(p) for p in params}
        owners = [
            o
            for o in discover.live_optimizers()
            if any(id(p) in ids for g in o.param_groups for p in g["params"])
        ]
        self.known.extend(o for o in owners if all(o is not k for k in self.known))
        discover.extend(self.tracked, self.known, params)

    def _optimizer_index(self, here: ThreadState, optimizer: Any) -> int:
        index = self._index_of(optimizer)
        if index < 0:
            manual = self._manual
            if manual is not None:  # an optimizer takes over: updates by hand end here
                if manual.pending and manual.thread == here.ident:
                    self._check_manual(here)
                self._manual = None
            self.optimizers.append(optimizer)
            self._optimizer_stepped = True
            if all(optimizer is not k for k in self.known):
                self.known.append(optimizer)
            self.discovered = True
            discover.extend(self.tracked, self.known)
            index = len(self.optimizers) - 1
        self._stepped_by.setdefault(index, set()).add(here.ident)
        here.stepped = True
        return index

    def _begin(
        self, here: ThreadState, optimizer: Any, skipped: bool, returned: Any = None
    ) -> None:
        here.stepping = None
        index = self._optimizer_index(here, optimizer)
        window = self._window_of(here, optimizer)
        zeroed = here.zeroed
        if zeroed is not None and not window.calls:
            window = zeroed  # the step follows those backward calls, whose grads are gone
        self._note_meaning(index, optimizer, window)
        scaler = self._scaler_for(here, optimizer)
        clip = here if self._clip_is_for(here, optimizer) else NO_CLIP
        if clip.pre_clip is not None:
            norms_ = clip.pre_clip  # measured (and unscaled) at the clip
        else:
            norms_ = self.measure.grads(self._foreign(here, index))
            grad_scale = getattr(optimizer, "grad_scale", None)  # fused + GradScaler
            if isinstance(grad_scale, torch.Tensor):
                norms_ = self._unscaled(norms_, grad_scale)
        found_inf = getattr(optimizer, "found_inf", None)
        scale = None
        if scaler is not None:
            scale = getattr(scaler, "_scale", None)  # a device tensor: no sync, unlike get_scale()
            scale = scale.detach().clone() if isinstance(scale, torch.Tensor) else None
        flag: bool | torch.Tensor = skipped
        if not skipped and isinstance(found_inf, torch.Tensor):
            flag = found_inf.detach().clone()
        loss: torch.Tensor | float | None = window.loss if window.loss_known else None
        if isinstance(returned, torch.Tensor) and returned.numel() == 1:
            loss = returned.detach().reshape(())
        elif isinstance(returned, (int, float)) and not isinstance(returned, bool):
            loss = float(returned)
        here.current = PendingStep(
            step=self.steps + 1,  # numbered when it ends: threads end them in any order
            optimizer=index,
            lrs=tuple(_lr(g) for g in optimizer.param_groups),
            backward_calls=window.calls,
            skipped=flag,
            param_norm=norms_,
            loss=loss,
            grad_norm=clip.clip_total,
            max_norm=clip.max_norm,
            norm_type=clip.norm_type,
            scaled_clip=clip.scaled_clip,
            clip_scale=clip.clip_scale,
            scale=scale,
            carried=self._carried(optimizer),
            members=self._members(optimizer),
            zeroed=zeroed is not None,
        )
        self._micro(here.current, window)
        if not skipped and updates.sampled(self.steps + 1, self.update_every):
            params = [p for g in optimizer.param_groups for p in g["params"]]
            here.snapshot = (params, self.updates.before(optimizer, params))

    def _micro(self, step: PendingStep, window: Window) -> None:
        """The micro-batch gradients the step's window measured; hooks on parameters
        found since."""
        taken = self.noise.take(window)
        if taken is not None:
            step.micro, step.micro_calls, step.micro_ranks, step.batch_samples = taken
        self.noise.attach()

    def _clip_is_for(self, here: ThreadState, optimizer: Any) -> bool:
        """The thread's clip goes to each optimizer that steps a parameter it touched
        (a dense optimizer's clip is not a SparseAdam's beside it), once each."""
        if here.clip_params is not None and here.clip_params.isdisjoint(
            id(p) for g in optimizer.param_groups for p in g["params"]
        ):
            return False
        if id(optimizer) in here.clip_takers:
            return False
        here.clip_takers.add(id(optimizer))
        return True

    def _note_meaning(self, index: int, optimizer: Any, window: Window) -> None:
        """What the step's numbers mean: the optimizer's settings (every step), the loss's
        kind (where it was read), the weights' norms before the first update."""
        self.settings.observe(index, self.steps + 1, optimizer)
        if window.loss_kind is not None:
            self.loss_kinds.setdefault(index, window.loss_kind)
        if self.first_weights is None:
            self.first_weights = self.measure.weights()

    def _finish(self, here: ThreadState, optimizer: Any) -> None:
        current, here.current = here.current, None
        if current is None:
            return
        if here.snapshot is not None:
            params, before = here.snapshot
            here.snapshot = None
            current.update_norm = self.updates.after(before)
            current.weight_norm = self.measure.scatter(params, norms([p.detach() for p in params]))
        self._resets[id(optimizer)] = _Reset(self._trained(optimizer), here.ident)
        self._record(here, current)

    def _record(self, here: ThreadState, current: PendingStep) -> None:
        """Hand the step to the recorder (none past --steps); this thread's next step
        starts afresh."""
        here.window = Window()  # the clip stays for the other optimizers it touched
        here.scaled = []
        here.scaled_by = None  # the step unscaled them (or skipped): a later clip is not
        here.zeroed = None
        if self.stopped:
            return
        self.steps += 1
        current.step = self.steps
        current.time_s = time.perf_counter() - self.start
        self.recorder.add(current)
        if self.max_steps is not None and self.steps >= self.max_steps:
            self.stopped = True
            if not here.home:
                self.notes.append(
                    f"--steps {self.max_steps} was reached in thread {here.name!r}: later "
                    "steps are not recorded, and the script ran on until its main thread "
                    "next called backward, step or zero_grad, or ended"
                )

    # -- updates by hand --------------------------------------------------------------
    def _manual_backward_end(self, here: ThreadState, roots: list[torch.Tensor]) -> None:
        """No optimizer has stepped: note what this backward left, for the check at the
        next backward's start (or the end of the watch)."""
        manual = self._manual
        if manual is None:
            if self._manual_scanned:
                return
            self._manual_scanned = True
            params = [p for p in discover.graph_leaves(roots) if p.grad is not None]
            if not params:
                return
            discover.extend(self.tracked, self.known, params, extra_name="tensor")
            manual = self._manual = _Manual(params, here.ident)
        tracked = self.tracked.params
        if manual.weights is None or len(manual.versions) != len(tracked):
            manual.weights = self.measure.weights()
            manual.versions = [p._version for p in tracked]
        if self.first_weights is None:
            self.first_weights = manual.weights
        manual.grads = self.measure.grads()
        manual.members = tuple(i for i, p in enumerate(tracked) if p.grad is not None)
        manual.loss = here.window.loss
        manual.kind = here.window.loss_kind or manual.kind
        manual.loss_known = here.window.loss_known
        manual.calls = here.window.calls
        if updates.sampled(self.steps + 1, self.update_every):  # the next step's is measured
            manual.before = self.updates.before(None, tracked)
        manual.pending = True

    def finish_manual(self) -> None:
        """The watch ends: an update by hand after the last backward is a step too."""
        with self.threads.lock:
            manual = self._manual
            if manual is not None and manual.pending and not self._optimizer_stepped:
                owner = self.threads.states.get(manual.thread) or self.threads.here()
                self._check_manual(owner, final=True)

    def _check_manual(self, here: ThreadState, final: bool = False) -> None:
        manual = self._manual
        assert manual is not None and manual.weights is not None and manual.grads is not None
        manual.pending = False
        tracked = self.tracked.params[: len(manual.versions)]
        now = self.measure.weights()[: len(tracked)]
        before = manual.weights
        same = (now == before) | (now.isnan() & before.isnan())
        flags = torch.cat([~same, now.isnan().any().reshape(1)])
        *moved, lost = flags.tolist()  # the one read-back that decides whether a step happened
        changed = [
            m or p._version != v for m, p, v in zip(moved, tracked, manual.versions, strict=True)
        ]
        if lost and not self._nan_noted:
            self._nan_noted = True
            self.notes.append(
                f"weights updated by hand became NaN at step {self.steps + 1}: updates of NaN "
                "weights through `.data` change nothing gradscope can see, so steps after it "
                "may be missing"
            )
        if not any(changed):
            manual.before = None
            return
        self.manually_updated.update(i for i, c in enumerate(changed) if c)
        if self._manual_index is None:
            self._manual_index = len(self.optimizers)
            self.optimizers.append(ManualUpdates())
        self._stepped_by.setdefault(self._manual_index, set()).add(here.ident)
        if manual.kind is not None:
            self.loss_kinds.setdefault(self._manual_index, manual.kind)
        holder = self.optimizers[self._manual_index]
        present = {id(p) for g in holder.param_groups for p in g["params"]}
        holder.param_groups[0]["params"] += [
            tracked[i]
            for i in sorted(set(manual.members) | self.manually_updated)
            if id(tracked[i]) not in present
        ]
        step = PendingStep(
            step=self.steps + 1,
            optimizer=self._manual_index,
            lrs=(),
            backward_calls=manual.calls,
            skipped=False,
            param_norm=manual.grads,
            loss=manual.loss if manual.loss_known else None,
            grad_norm=here.clip_total,
            max_norm=here.max_norm,
            norm_type=here.norm_type,
            members=manual.members,
            carried=self._carried(holder),
        )
        # as after an optimizer's step: gradients still there at the next backward's
        # start were never reset (the script's zero_grad is missing)
        self._resets[id(holder)] = _Reset([tracked[i] for i in manual.members], here.ident)
        if manual.before is not None:
            step.update_norm = self.updates.after(manual.before)
            step.weight_norm = now
            manual.before = None
        manual.weights = now
        manual.versions = [p._version for p in tracked]
        if final:
            if not self.stopped:
                self.steps += 1
                step.time_s = time.perf_counter() - self.start
                self.recorder.add(step)
            return
        self._record(here, step)


def _closure(args: Any, kwargs: Any) -> tuple[Callable[..., Any] | None, str]:
    """The closure given to `optimizer.step` (args include the optimizer first)."""
    if isinstance(kwargs, dict) and callable(kwargs.get("closure")):
        return kwargs["closure"], "kwargs"
    if isinstance(args, tuple) and len(args) > 1 and callable(args[1]):
        return args[1], "args"
    return None, ""


def _lr(group: dict[str, Any]) -> float:
    lr = group.get("lr", float("nan"))
    if isinstance(lr, torch.Tensor) and lr.device.type != "cpu":
        return float("nan")  # reading a device lr would sync; it is in the param group
    return float(lr)
