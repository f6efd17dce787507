"""The interception: global hooks and class-level wrappers, all undone by `remove`.

- `torch.optim.optimizer.register_optimizer_step_pre_hook/_post_hook`: every step of
  any Optimizer (plain loops, HF Trainer, Lightning, accelerate), no per-instance patch.
- `Tensor.backward` / `torch.autograd.backward`: the loss and the number of backward
  calls per step (gradient accumulation); the nested backward of a reentrant
  checkpoint is not counted.
- `torch.nn.utils.clip_grad_norm_`, `get_total_norm`, `clip_grads_with_norm_`:
  the norm before clipping, the script's own value, and max_norm. Replaced in the
  modules before the script imports them.
- `GradScaler.scale` / `step` (class level): the unscaled loss, the loss scale,
  and skipped steps. A non-fused optimizer's step hooks do not fire on a skipped
  step (the step wrapper notices); a fused one's fire on every step with
  `optimizer.found_inf` and, unless `unscale_` ran, `optimizer.grad_scale` set and
  the gradients still scaled, which the measurement divides out.

Nothing here reads a value back to the host: see recorder.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from gradscope.watcher import discover
from gradscope.watcher.measure import Measure, norms
from gradscope.watcher.recorder import PendingStep, Recorder


class StopWatching(BaseException):
    """Raised after the last step asked for (--steps); a BaseException so that the
    script's own `except Exception` lets it through."""


class Interceptor:
    """The state the hooks share while one run is watched."""

    def __init__(
        self, recorder: Recorder, update_every: int = 25, max_steps: int | None = None
    ) -> None:
        self.recorder = recorder
        self.update_every = max(1, update_every)
        self.max_steps = max_steps
        self.start = time.perf_counter()
        self.tracked = discover.Tracked()
        self.optimizers: list[torch.optim.Optimizer] = []
        """The optimizers that stepped, by index."""
        self.known: list[torch.optim.Optimizer] = []
        """Those and the ones found owning clipped parameters before their first step."""
        self.discovered = False
        self.steps = 0
        self.backward_total = 0
        """backward() calls over the whole run."""
        self._undo: list[Callable[[], None]] = []
        self._depth = 0
        self._reset_step()
        self._scaled: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._scaler_calls: list[list[Any]] = []
        self.measure = Measure(self.tracked)
        self._owned_cache: tuple[tuple[int, ...], list[torch.Tensor]] = ((), [])
        self._current: PendingStep | None = None
        self._snapshot: tuple[list[torch.Tensor], list[torch.Tensor]] | None = None

    def _reset_step(self) -> None:
        self.backward_calls = 0
        self.loss: torch.Tensor | None = None
        self.loss_known = True
        self.carried: torch.Tensor | None = None
        self.pre_clip: torch.Tensor | None = None
        self.clip_total: torch.Tensor | None = None
        self.max_norm: float | None = None

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
        while self._undo:
            self._undo.pop()()

    def _patch(self, owner: Any, name: str, make: Callable[[Any], Any]) -> None:
        original = owner.__dict__[name]
        setattr(owner, name, make(original))
        self._undo.append(lambda: setattr(owner, name, original))

    # -- backward ---------------------------------------------------------------------
    def _wrap_tensor_backward(self, original: Any) -> Any:
        def backward(tensor: torch.Tensor, gradient: Any = None, *args: Any, **kw: Any) -> Any:
            if self._depth == 0:
                self._on_backward(tensor, gradient)
            self._depth += 1
            try:
                return original(tensor, gradient, *args, **kw)
            finally:
                self._depth -= 1

        return backward

    def _wrap_autograd_backward(self, original: Any) -> Any:
        def backward(tensors: Any, grad_tensors: Any = None, *args: Any, **kw: Any) -> Any:
            if self._depth == 0:
                single = tensors if isinstance(tensors, torch.Tensor) else None
                if single is None and len(tensors) == 1:
                    single = tensors[0]
                self._on_backward(single, grad_tensors)
            self._depth += 1
            try:
                return original(tensors, grad_tensors, *args, **kw)
            finally:
                self._depth -= 1

        return backward

    def _on_backward(self, tensor: torch.Tensor | None, gradient: Any) -> None:
        if self.backward_calls == 0 and self.discovered:
            self.carried = self._carried_norm()
        self.backward_calls += 1
        self.backward_total += 1
        if tensor is None or gradient is not None or tensor.numel() != 1:
            self.loss_known = False
            return
        value = next((u for s, u in self._scaled if s is tensor), tensor).detach()
        self.loss = value.float() if self.loss is None else self.loss + value.float()

    def _owned(self) -> list[torch.Tensor]:
        key = tuple(id(o) for o in self.known)
        if self._owned_cache[0] != key:
            ids = {id(p) for o in self.known for g in o.param_groups for p in g["params"]}
            self._owned_cache = (key, [p for p in self.tracked.params if id(p) in ids])
        return self._owned_cache[1]

    def _members(self, optimizer: Any) -> tuple[int, ...]:
        index = self.tracked.index
        return tuple(
            index[id(p)] for g in optimizer.param_groups for p in g["params"] if id(p) in index
        )

    def _carried_norm(self) -> torch.Tensor | None:
        """Over the optimizers' parameters only: zero_grad() cannot reset the others."""
        grads = [p.grad for p in self._owned() if p.grad is not None]
        if not grads:
            return None
        return torch.linalg.vector_norm(torch.stack(norms(grads)))

    # -- clipping ---------------------------------------------------------------------
    def _wrap_clip(self, original: Any) -> Any:
        def clip_grad_norm_(
            parameters: Any, max_norm: float, norm_type: float = 2.0, *a: Any, **kw: Any
        ) -> Any:
            if self._depth:
                return original(parameters, max_norm, norm_type, *a, **kw)
            params = [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)
            self._ensure_discovered(params)
            self.pre_clip = self.measure.grads()
            self._depth += 1
            try:
                total = original(params, max_norm, norm_type, *a, **kw)
            finally:
                self._depth -= 1
            if float(norm_type) == 2.0:
                self.clip_total, self.max_norm = total, float(max_norm)
            return total

        return clip_grad_norm_

    def _wrap_total_norm(self, original: Any) -> Any:
        def get_total_norm(tensors: Any, norm_type: float = 2.0, *a: Any, **kw: Any) -> Any:
            total = original(tensors, norm_type, *a, **kw)
            if self._depth == 0 and float(norm_type) == 2.0:
                self.clip_total = total
            return total

        return get_total_norm

    def _wrap_clip_with_norm(self, original: Any) -> Any:
        def clip_grads_with_norm_(
            parameters: Any, max_norm: float, total_norm: Any, *a: Any, **kw: Any
        ) -> Any:
            if self._depth == 0:
                params = [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)
                self._ensure_discovered(params)
                self.pre_clip = self.measure.grads()
                self.max_norm = float(max_norm)
                if self.clip_total is None:
                    self.clip_total = total_norm
                parameters = params
            return original(parameters, max_norm, total_norm, *a, **kw)

        return clip_grads_with_norm_

    # -- GradScaler -------------------------------------------------------------------
    def _wrap_scale(self, original: Any) -> Any:
        def scale(scaler: Any, outputs: Any) -> Any:
            out = original(scaler, outputs)
            if isinstance(outputs, torch.Tensor) and out is not outputs:
                self._scaled = [*self._scaled[-3:], (out, outputs)]
            return out

        return scale

    def _wrap_scaler_step(self, original: Any) -> Any:
        def step(scaler: Any, optimizer: Any, *args: Any, **kw: Any) -> Any:
            call = [scaler, optimizer, False]
            self._scaler_calls.append(call)
            try:
                out = original(scaler, optimizer, *args, **kw)
                if scaler.is_enabled() and not call[2]:  # the optimizer's hooks never ran
                    self._begin(optimizer, skipped=True)
                    self._finish(optimizer)
            finally:
                self._scaler_calls.pop()
            return out

        return step

    def _scaler_for(self, optimizer: Any) -> Any:
        for call in reversed(self._scaler_calls):
            if call[1] is optimizer:
                call[2] = True  # the step (or the skip) is being recorded
                return call[0] if call[0].is_enabled() else None
        return None

    # -- optimizer steps --------------------------------------------------------------
    def _pre_step(self, optimizer: Any, _args: Any, _kwargs: Any) -> None:
        self._begin(optimizer, skipped=False)

    def _post_step(self, optimizer: Any, _args: Any, _kwargs: Any) -> None:
        self._finish(optimizer)

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

    def _optimizer_index(self, optimizer: Any) -> int:
        for i, o in enumerate(self.optimizers):
            if o is optimizer:
                return i
        self.optimizers.append(optimizer)
        if all(optimizer is not k for k in self.known):
            self.known.append(optimizer)
        self.discovered = True
        discover.extend(self.tracked, self.known)
        return len(self.optimizers) - 1

    def _begin(self, optimizer: Any, skipped: bool) -> None:
        index = self._optimizer_index(optimizer)
        scaler = self._scaler_for(optimizer)
        norms = self.pre_clip if self.pre_clip is not None else self.measure.grads()
        total = self.clip_total
        grad_scale = getattr(optimizer, "grad_scale", None)  # fused + GradScaler, not unscaled
        found_inf = getattr(optimizer, "found_inf", None)
        if isinstance(grad_scale, torch.Tensor):
            norms = torch.where(norms >= 0, norms / grad_scale, norms)
            total = None if total is None else total / grad_scale
        scale = None
        if scaler is not None:
            scale = getattr(scaler, "_scale", None)  # a device tensor: no sync, unlike get_scale()
            scale = scale.detach().clone() if isinstance(scale, torch.Tensor) else None
        flag: bool | torch.Tensor = skipped
        if not skipped and isinstance(found_inf, torch.Tensor):
            flag = found_inf.detach().clone()
        self.steps += 1
        self._current = PendingStep(
            step=self.steps,
            optimizer=index,
            lrs=tuple(_lr(g) for g in optimizer.param_groups),
            backward_calls=self.backward_calls,
            skipped=flag,
            param_norm=norms,
            loss=self.loss if self.loss_known else None,
            grad_norm=total,
            max_norm=self.max_norm,
            scale=scale,
            carried=self.carried,
            members=self._members(optimizer),
        )
        if not skipped and (self.steps - 1) % self.update_every == 0:
            params = [p for g in optimizer.param_groups for p in g["params"]]
            self._snapshot = (params, [p.detach().clone() for p in params])

    def _finish(self, optimizer: Any) -> None:
        current, self._current = self._current, None
        if current is None:
            return
        if self._snapshot is not None:
            params, before = self._snapshot
            self._snapshot = None
            torch._foreach_sub_(before, [p.detach() for p in params])
            current.update_norm = self.measure.scatter(params, norms(before))
            current.weight_norm = self.measure.scatter(params, norms([p.detach() for p in params]))
        current.time_s = time.perf_counter() - self.start
        self.recorder.add(current)
        self._reset_step()
        self._scaled = []
        if self.max_steps is not None and self.steps >= self.max_steps:
            raise StopWatching()

    # -- measurement ------------------------------------------------------------------


def _lr(group: dict[str, Any]) -> float:
    lr = group.get("lr", float("nan"))
    if isinstance(lr, torch.Tensor) and lr.device.type != "cpu":
        return float("nan")  # reading a device lr would sync; it is in the param group
    return float(lr)
