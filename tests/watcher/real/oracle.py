"""An independent reference recorder of training steps: the oracle the watch numbers are
compared to. It imports nothing from gradscope and is never installed together with watch:
a test runs the same seeded script twice, once plain inside `Oracle` and once under watch.

What it calls a step, and what it records for it (the contract watch is held to):

- an optimizer step: every `Optimizer.step()` call (torch's global step pre/post hooks).
  Without a closure: the loss is the sum of the values `backward()` ran on since the
  previous step; the gradient norms are those right after the last backward that reached
  each parameter (before any clipping). With a closure (LBFGS, or SGD given one): the
  closure's first evaluation, i.e. the loss `step()` returns and the gradients it left.
- a manual update (no optimizer: `p.data.add_(p.grad, alpha=-lr)`): parameters whose
  values changed between two backward calls (or after the last one) with no optimizer
  step in between; loss and norms as for an optimizer step without a closure.

Norms are float64 L2 norms of `.grad`; a step's total is over the parameters it updates
(the optimizer's param groups, or the parameters that changed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch.optim.optimizer import (
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)

MANUAL = "manual update"


@dataclass(frozen=True)
class OracleStep:
    step: int
    """1-based count of all updates, optimizer and manual together."""
    kind: str
    """The optimizer's class name, or MANUAL."""
    loss: float | None
    grad_norm: float
    """Float64 L2 norm over the updated parameters' gradients (None grads left out)."""
    param_norms: tuple[float, ...]
    """The updated parameters' gradient norms, largest first (None grads left out)."""
    updated: int
    """How many parameters the step updates."""


def _norm(t: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm(t.detach().to(torch.float64)))


def _leaves(root: torch.Tensor) -> list[torch.Tensor]:
    """The leaf tensors a backward from `root` accumulates gradients into."""
    out: dict[int, torch.Tensor] = {}
    seen: set[int] = set()
    stack = [root.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        variable = getattr(fn, "variable", None)
        if isinstance(variable, torch.Tensor):
            out[id(variable)] = variable
        stack.extend(f for f, _ in fn.next_functions)
    return list(out.values())


class Oracle:
    """`with Oracle() as o: run()`; then `o.steps`."""

    def __init__(self) -> None:
        self.steps: list[OracleStep] = []
        self._undo: list = []
        self._depth = 0
        self._in_step = False
        self._pending_loss: float | None = 0.0
        self._grad_norms: dict[int, float] = {}
        """id(param) → its gradient norm right after the last backward that reached it
        since the previous step."""
        self._weights: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        """id(param) → (param, its values after the last backward): manual updates."""

    # -- install / remove -----------------------------------------------------------------
    def __enter__(self) -> Oracle:
        pre = register_optimizer_step_pre_hook(self._pre_step)
        post = register_optimizer_step_post_hook(self._post_step)
        self._undo += [pre.remove, post.remove]
        self._patch(torch.Tensor, "backward", self._tensor_backward)
        self._patch(torch.autograd, "backward", self._autograd_backward)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self._depth == 0 and not self._in_step:
                self._manual_update()
        finally:
            while self._undo:
                self._undo.pop()()

    def _patch(self, owner, name, make) -> None:
        original = owner.__dict__[name]
        setattr(owner, name, make(original))
        self._undo.append(lambda: setattr(owner, name, original))

    # -- backward ---------------------------------------------------------------------------
    def _tensor_backward(self, original):
        def backward(tensor, gradient=None, *args, **kwargs):
            return self._backward(
                lambda: original(tensor, gradient, *args, **kwargs), tensor, gradient
            )

        return backward

    def _autograd_backward(self, original):
        def backward(tensors, grad_tensors=None, *args, **kwargs):
            single = tensors if isinstance(tensors, torch.Tensor) else None
            if single is None and len(tensors) == 1:
                single = tensors[0]
            return self._backward(
                lambda: original(tensors, grad_tensors, *args, **kwargs), single, grad_tensors
            )

        return backward

    def _backward(self, call, tensor, gradient):
        if self._depth or self._in_step:  # nested (checkpoint) or inside a closure
            self._depth += 1
            try:
                return call()
            finally:
                self._depth -= 1
        self._manual_update()
        self._depth += 1
        try:
            out = call()
        finally:
            self._depth -= 1
        if tensor is None or gradient is not None or tensor.numel() != 1:
            self._pending_loss = None
        elif self._pending_loss is not None:
            self._pending_loss += float(tensor.detach().to(torch.float64))
        leaves = _leaves(tensor) if tensor is not None else []
        for p in leaves:
            if p.grad is not None:
                self._grad_norms[id(p)] = _norm(p.grad)
            self._weights[id(p)] = (p, p.detach().clone())
        return out

    def _manual_update(self) -> None:
        """Record a step if weights changed since the last backward, no optimizer stepping."""
        changed = [p for p, before in self._weights.values() if not torch.equal(p.detach(), before)]
        if changed:
            self._record(MANUAL, changed)
        self._weights = {}

    # -- optimizer steps --------------------------------------------------------------------
    def _pre_step(self, optimizer, args, kwargs):
        self._in_step = True
        self._weights = {}
        params = [p for g in optimizer.param_groups for p in g["params"]]
        # args starts with the optimizer itself: step(self, closure=None)
        closure = args[1] if len(args) > 1 else kwargs.get("closure")
        if closure is None:
            self._record(type(optimizer).__name__, params)
            return None
        first = [True]

        def recorded_closure():
            loss = closure()
            if first[0]:
                first[0] = False
                self._pending_loss = None if loss is None else float(loss.detach().double())
                self._grad_norms = {id(p): _norm(p.grad) for p in params if p.grad is not None}
                self._record(type(optimizer).__name__, params)
            return loss

        if len(args) > 1:
            return (args[0], recorded_closure, *args[2:]), kwargs
        return args, {**kwargs, "closure": recorded_closure}

    def _post_step(self, optimizer, args, kwargs) -> None:
        self._in_step = False

    def _record(self, kind: str, params: list[torch.Tensor]) -> None:
        unique = list({id(p): p for p in params}.values())
        norms = []
        for p in unique:  # as the last backward left it: the script may clip or reset since
            known = self._grad_norms.get(id(p))
            if known is not None:
                norms.append(known)
            elif p.grad is not None:
                norms.append(_norm(p.grad))
        self.steps.append(
            OracleStep(
                step=len(self.steps) + 1,
                kind=kind,
                loss=self._pending_loss,
                grad_norm=math.sqrt(sum(n * n for n in norms)),
                param_norms=tuple(sorted(norms, reverse=True)),
                updated=len(unique),
            )
        )
        self._pending_loss = 0.0
        self._grad_norms = {}
