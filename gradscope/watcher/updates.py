"""The update of a step, ‖Δw‖ per parameter, without a copy of every parameter.

A copy of the parameters before the step costs as much memory as the model (+4 GiB at
1B float32 parameters), so the update is measured two ways instead (a copy is the cheaper
of the two: Adam's tensors are copied too, up to COPY_INSTEAD bytes):

- derived, after the step, from the state the optimizer keeps, for torch's own Adam and
  AdamW (amsgrad, L2 or decoupled decay, maximize; single-tensor, foreach or fused) and
  SGD (momentum, dampening, nesterov, weight decay). The formulas invert torch's own step
  (torch/optim/adam.py, sgd.py), with the weights after the step standing in for those
  before where decay needs them:
  Adam: Δw = -u, u = lr/(1-β1^t) · m / (√v/√(1-β2^t) + eps) (v: the max with amsgrad);
  AdamW: Δw = -(u + lr·wd·w)/(1 - lr·wd);
  SGD with momentum: Δw = -lr·buf; nesterov: -lr·(g + wd·w + μ·buf)/(1 - lr·wd);
  plain SGD: -lr·(g + wd·w)/(1 - lr·wd) (g: ±the gradient, unscaled). A parameter with
  no gradient was not stepped: Δw = 0. A fused step GradScaler skipped (found_inf): 0.
  Temporaries are taken in bounded pieces (update_pieces.py).
- copied, for everything else (other optimizers, updates by hand, parameters that are
  not float32/float64 or are complex, sparse gradients, a learning rate held on the
  device): a copy before the step of as many tensors as fit in a fixed budget
  (2% of their bytes, at least 16 MiB), rotating through them from step to step.
  A tensor not copied this step has no update (-1, a NaN ratio); one larger than the
  budget is never measured, and a note says so.

Which steps are measured: each of the first DENSE_STEPS steps, then every `update_every`.
Every tensor at each of the first FULL_STEPS and at the steps `update_every` samples
(1, 26, 51, ...); at the other dense steps the derived route takes one tensor in ROTATION,
in turn (`rotated`; Adam's of them copied within COPY_INSTEAD), so that every tensor
keeps a ratio every few steps for the medians the rules take, at a fraction of the cost
(the derived update is about as costly as the optimizer's own step, at each of 100
steps).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from gradscope.distributed.norms import local
from gradscope.watcher import update_pieces, update_plan
from gradscope.watcher.measure import Measure, norms
from gradscope.watcher.update_pieces import Scratch, apply, pieced
from gradscope.watcher.update_plan import host_float

DENSE_STEPS = 100
"""Every one of the first steps is measured (a learning rate too high in warm-up shows
from step 1)."""
SHARE = 0.02
"""The copy budget, as a share of the bytes of the tensors that need a copy."""
FLOOR = 16 * 2**20
"""The copy budget is never below this (a small model is copied whole, as cheap)."""
COPY_INSTEAD = 16 * 2**20
"""Adam's tensors are copied rather than derived up to this many bytes of copies in all:
a copy before the step and a subtraction after take a third of the CPU of deriving the
update from Adam's state (square root, shift, division, decay, norm), 0.37 against 1.08
ms on a 0.41M-parameter char-LM, and give the update the weights really took."""


FULL_STEPS = 10
"""Every tensor's update at each of the first steps (an early blow-up, a warm-up's first
large updates, a per-step total for the spike analysis)."""


def sampled(step: int, every: int) -> bool:
    """Step `step` (1-based) has its update measured."""
    return step <= DENSE_STEPS or (step - 1) % max(1, every) == 0


def rotated(step: int, every: int) -> bool:
    """A measured step whose derived updates are one tensor in ROTATION (see above)."""
    return FULL_STEPS < step <= DENSE_STEPS and (step - 1) % max(1, every) != 0


@dataclass
class Before:
    """What a measured step holds from before its update."""

    optimizer: Any
    """The optimizer whose state derives the update (None: everything copied)."""
    derived: list[tuple[str, dict[str, Any], list[torch.Tensor]]]
    """(kind, param group, its parameters whose update is derived after the step)."""
    copied: list[torch.Tensor] = field(default_factory=list)
    copies: list[torch.Tensor] = field(default_factory=list)
    too_large: list[torch.Tensor] = field(default_factory=list)
    """Tensors a copy of which would exceed the budget: never measured."""
    by_hand: bool = False
    measured: list[torch.Tensor] | None = None
    """At a rotated step, the tensors measured (their weight norms are the ones read)."""


class Updates:
    """Per-step update norms, laid out like `measure.tracked.params` (-1: not measured)."""

    def __init__(self, measure: Measure, notes: list[str]) -> None:
        self.measure = measure
        self.notes = notes
        self._cursor: dict[int, int] = {}
        self._too_large: set[int] = set()
        self._scratch = Scratch()

    def before(self, optimizer: Any, params: list[torch.Tensor], turn: int | None = None) -> Before:
        """Just before a measured step of `optimizer` (None: an update by hand) over
        `params`: the plan, and the copies the derived route cannot do without. `turn`:
        a rotated step's number (only the derived tensors whose turn it is; Adam's among
        them copied within COPY_INSTEAD). The copies are fresh clones: a buffer kept
        from step to step was tried, and cost more than it saved (the clones' memory,
        freed after the step, is what the next backward's gradients are allocated in;
        with a buffer kept aside they were page-faulted in afresh: +800 minor faults a
        step on a 10M-parameter GPT, 5 ms of its step)."""
        index = self.measure.tracked.index
        params = [p for p in params if id(p) in index]
        inner = update_plan.derivable(optimizer)
        derived = [] if inner is None else update_plan.plan(inner, index)
        covered = {id(p) for _, _, ps in derived for p in ps}
        rest = [p for p in params if id(p) not in covered]
        copied, too_large = self._rotate(id(optimizer), rest)
        if turn is not None:
            derived = update_plan.turn_of(derived, index, turn)
        derived, instead = update_plan.copy_instead(
            derived, COPY_INSTEAD - update_plan.size(copied)
        )
        measured = None
        if turn is not None:
            measured = [p for _, _, ps in derived for p in ps] + copied + instead
        copied += instead
        copies = [p.detach().clone() for p in copied]
        return Before(inner, derived, copied, copies, too_large, optimizer is None, measured)

    def after(self, before: Before) -> torch.Tensor:
        """Just after the step: [P] update norms."""
        self._note_too_large(before)
        params: list[torch.Tensor] = []
        values: list[torch.Tensor] = []
        if before.copied:
            torch._foreach_sub_(before.copies, [p.detach() for p in before.copied])
            params += before.copied
            values += norms(before.copies)
            before.copies = []
        if before.derived:
            found_inf = getattr(before.optimizer, "found_inf", None)
            scale = getattr(before.optimizer, "grad_scale", None)
            for kind, group, ps in before.derived:
                try:
                    if kind == "adam":
                        got = _adam(before.optimizer, group, ps, self._scratch)
                    else:
                        got = _sgd(before.optimizer, group, ps, scale, self._scratch)
                except (KeyError, RuntimeError, TypeError, ValueError) as exc:
                    self._failed(exc)  # a state of another shape (loaded, edited)
                    continue
                if isinstance(found_inf, torch.Tensor) and got:  # a fused step skipped
                    # where, not a product: a skipped step's state may hold inf or NaN (a
                    # momentum buffer made from the overflowing gradient), and NaN × 0 is NaN
                    stacked = torch.stack(got)
                    kept = torch.where(found_inf.reshape(()) == 0, stacked, 0.0)
                    got = list(kept.unbind())
                params += ps
                values += got
        return self.measure.scatter(params, values)

    def _failed(self, exc: Exception) -> None:
        note = f"update/weight ratios not derived: {type(exc).__name__}: {exc}"
        if note not in self.notes:
            self.notes.append(note)

    def _rotate(
        self, key: int, tensors: list[torch.Tensor]
    ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """The next tensors, from where the previous step stopped, that fit the budget;
        and those larger than the budget."""
        if not tensors:
            return [], []
        sizes = [p.numel() * p.element_size() for p in tensors]
        budget = max(FLOOR, int(SHARE * sum(sizes)))
        if sum(sizes) <= budget:
            return list(tensors), []
        too_large = [p for p, s in zip(tensors, sizes, strict=True) if s > budget]
        n = len(tensors)
        start = self._cursor.get(key, 0) % n
        chosen: list[torch.Tensor] = []
        used = 0
        for k in range(n):
            i = (start + k) % n
            if sizes[i] > budget:
                continue
            if used + sizes[i] > budget:
                self._cursor[key] = i
                break
            chosen.append(tensors[i])
            used += sizes[i]
        return chosen, too_large

    def _note_too_large(self, before: Before) -> None:
        """Once per tensor, when a step that could not measure it happened."""
        new = [p for p in before.too_large if id(p) not in self._too_large]
        if not new:
            return
        self._too_large.update(id(p) for p in new)
        names = self.measure.tracked.names
        index = self.measure.tracked.index
        shown = ", ".join(names[index[id(p)]] for p in new[:3])
        more = f" and {len(new) - 3} more" if len(new) > 3 else ""
        how = "updated by hand" if before.by_hand else "its optimizer keeps no state to derive it"
        self.notes.append(
            f"update/weight ratios not measured for {shown}{more}: {how}, and a copy "
            f"would exceed the budget ({SHARE:.0%} of the parameters' bytes)"
        )


# -- the formulas ----------------------------------------------------------------------
Coef = list[Any]
"""One number per tensor: Python floats, or 0-dim device tensors (never read back)."""


def _adam(
    optimizer: Any, group: dict[str, Any], ps: list[torch.Tensor], scratch: Scratch
) -> list[torch.Tensor]:
    """Norms of Adam's (AdamW's) update of each of `ps`, from its state after the step:
    u = lr/(1-β1^t) · m/(√v/√(1-β2^t) + eps) = gain · m/(√v + shift)."""
    lr, wd, eps = (
        host_float(group["lr"]),
        host_float(group["weight_decay"]),
        host_float(group["eps"]),
    )
    beta1, beta2 = (host_float(b) for b in group["betas"])
    decay = lr * wd if group.get("decoupled_weight_decay") else 0.0
    key = "max_exp_avg_sq" if group.get("amsgrad") else "exp_avg_sq"
    live = [i for i, p in enumerate(ps) if p.grad is not None and optimizer.state.get(p)]
    states = [optimizer.state[ps[i]] for i in live]
    steps = [s["step"] for s in states]
    host = all(not isinstance(t, torch.Tensor) or t.device.type == "cpu" for t in steps)
    gain, shift = _adam_coefficients(steps, lr, beta1, beta2, eps, host)

    def piece(owners: list[int], parts: list[list[torch.Tensor]], into: Any) -> list[Any]:
        m, v, w = parts
        t = apply(into, "sqrt", v, 1)
        torch._foreach_add_(t, _each(shift, owners))
        if not decay:
            got = norms(apply(into, "div", m, 0, t))
            return list(torch._foreach_mul(got, _each(gain, owners)))
        r = apply(into, "mul", w, 0, decay)  # decoupled decay: (u + lr·wd·w)/(1 - lr·wd)
        torch._foreach_addcdiv_(r, m, t, _each(gain, owners))
        return norms(r)

    tensors = [[local(s["exp_avg"]) for s in states], [local(s[key]) for s in states]]
    tensors.append([local(ps[i].detach()) for i in live])
    got = pieced(tensors, piece, scratch, _limit(tensors[0]))
    if decay and got:
        got = list(torch._foreach_div(got, abs(1 - decay)))
    return _placed(ps, live, got)


def _adam_coefficients(
    steps: list[Any], lr: float, beta1: float, beta2: float, eps: float, host: bool
) -> tuple[Coef, Coef]:
    """gain = lr·√(1-β2^t)/(1-β1^t) and shift = eps·√(1-β2^t), per tensor: floats when
    the step counts are on the host, else 0-dim tensors beside them (nothing read back)."""
    # t = 0: a fused step GradScaler skipped before any was taken (no update): gain 0,
    # and a shift of 1 keeps 0/0 out of m/(√v + shift)
    if host:
        ts = [host_float(t) for t in steps]
        root = [math.sqrt(1 - beta2**t) for t in ts]
        return [lr * r / (1 - beta1**t) if t else 0.0 for t, r in zip(ts, root, strict=True)], [
            eps * r if t else 1.0 for t, r in zip(ts, root, strict=True)
        ]
    t = torch.stack([s.double() for s in steps])  # capturable or fused: they stay there
    root_t = (1 - beta2**t).sqrt()
    gain = torch.where(t > 0, lr * root_t / (1 - beta1**t), 0.0)
    return list(gain.unbind()), list(torch.where(t > 0, eps * root_t, 1.0).unbind())


def _sgd(
    optimizer: Any, group: dict[str, Any], ps: list[torch.Tensor], scale: Any, scratch: Scratch
) -> list[torch.Tensor]:
    """Norms of SGD's update of each of `ps` after the step: lr·‖buf‖ with momentum, else
    lr·‖g + wd·w (+ μ·buf with nesterov)‖/|1 - lr·wd| (g: ±the unscaled gradient)."""
    lr, wd, mu = (
        host_float(group["lr"]),
        host_float(group["weight_decay"]),
        host_float(group["momentum"]),
    )
    nesterov = bool(group.get("nesterov")) and mu != 0
    live = [i for i, p in enumerate(ps) if p.grad is not None]
    grads = [local(ps[i].grad) for i in live]  # type: ignore[arg-type]
    sign: float | torch.Tensor = -1.0 if group.get("maximize") else 1.0
    if isinstance(scale, torch.Tensor):  # fused + GradScaler: the step unscaled them
        sign = sign / scale.detach().reshape(())
    if mu and not nesterov:
        bufs = [local(optimizer.state[ps[i]]["momentum_buffer"]) for i in live]
        return _placed(ps, live, list(torch._foreach_mul(norms(bufs), lr)) if bufs else [])
    tensors = [grads, [local(ps[i].detach()) for i in live]]
    if nesterov:
        tensors.append([local(optimizer.state[ps[i]]["momentum_buffer"]) for i in live])

    def piece(owners: list[int], parts: list[list[torch.Tensor]], into: Any) -> list[Any]:
        r = apply(into, "mul", parts[0], 0, sign)
        if wd:
            torch._foreach_add_(r, parts[1], alpha=wd)
        if nesterov:
            torch._foreach_add_(r, parts[2], alpha=mu)
        return norms(r)

    got = pieced(tensors, piece, scratch, _limit(tensors[0]))
    return _placed(ps, live, list(torch._foreach_mul(got, lr / abs(1 - lr * wd))) if got else [])


def _limit(first: list[torch.Tensor]) -> int:
    """Bytes of `first` per piece: PIECE on a CPU, else the copy budget."""
    if not first or first[0].device.type == "cpu":
        return update_pieces.PIECE
    return max(FLOOR, int(SHARE * update_plan.size(first)))


def _each(coef: Coef, owners: list[int]) -> Any:
    """The coefficients of `owners`: one float where they are all the same (torch's
    step counts of one group mostly are: a scalar op, not a list)."""
    picked = [coef[o] for o in owners]
    first = picked[0]
    if isinstance(first, float) and all(c == first for c in picked):
        return first
    return picked


def _placed(ps: list[torch.Tensor], live: list[int], got: list[torch.Tensor]) -> list[torch.Tensor]:
    """A norm per parameter of `ps`: `got` at `live`, 0 for the ones the step left alone
    (no gradient)."""
    if len(live) == len(ps):
        return got
    zero = torch.zeros((), dtype=torch.float64, device=ps[0].device)
    out = [zero] * len(ps)
    for i, n in zip(live, got, strict=True):
        out[i] = n
    return out
