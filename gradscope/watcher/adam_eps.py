"""Where Adam's eps outweighs √v̂, read from the optimizer's own state at a few steps.

Adam divides the momentum by √v̂ + eps. Where eps is above √v̂ for most of the
elements, the step there is lr·m̂/eps: SGD with a learning rate of lr/eps, not Adam.
At steps 1-3 and every SAMPLE_EVERY steps (LATER_EVERY after step 100), after the step,
each parameter's share of elements with 0 < v < eps²·(1 - β2^t) (√v̂ < eps) is computed
on the device; all of the samples are read back once, when the run ends (`facts`).
Elements with v = 0 never had a gradient (an unused embedding row): Adam does not move
them either way, so they are not counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from gradscope.distributed.norms import local
from gradscope.steps.state_facts import EpsSample
from gradscope.watcher import discover
from gradscope.watcher.optim_known import adam_rule

SAMPLE_EVERY = 50
"""Steps 50 and 100, then 1000k (a sample costs a few small ops per parameter: 20-odd ms of
a 10M-parameter GPT's 200 ms step; at 50 and 100 adam_rms.py's sample counts them)."""
LATER_EVERY = 1000
VERIFY = 3
"""Of an optimizer not known to step Adam's rule, the steps at which Adam's update from
its state is kept, to hold against the update measured there (every tensor's: updates.py's
first steps), when the weights are still close to their initial norm."""
MAX_SAMPLES = 64
"""Samples kept at most (the first ones): up to step 57,000."""


def sampled(step: int) -> bool:
    return step <= 3 or step % (SAMPLE_EVERY if step <= 100 else LATER_EVERY) == 0


@dataclass
class Pending:
    optimizer: int
    step: int
    eps: float
    positions: list[int]
    counts: torch.Tensor
    """[k, 2]: per parameter, elements under eps and elements with v > 0 (a third column
    where the class is not one known to step Adam's rule, at a VERIFY step: Σ û², Adam's
    update over the lr from this state, for rules/adam_measured.py to hold against the
    update measured at the step)."""
    known: bool = True


@dataclass
class AdamEps:
    pending: list[Pending] = field(default_factory=list)

    def observe(
        self,
        tracked: discover.Tracked,
        index: int,
        optimizer: Any,
        step: int,
        counted: dict[int, torch.Tensor] | None = None,
    ) -> None:
        """After optimizer `index`'s step `step`; `counted`: the counts adam_rms.py took
        at this step, per position (not counted twice)."""
        if not sampled(step) or len(self.pending) >= MAX_SAMPLES:
            return
        known = adam_rule(optimizer)
        for group in optimizer.param_groups:
            got = _group(tracked, optimizer, group, counted or {}, known, step)
            if got is not None:
                self.pending.append(Pending(index, step, got[0], got[1], got[2], known))

    def facts(self) -> list[EpsSample]:
        """Every sample, read back in one go."""
        if not self.pending:
            return []
        device = self.pending[0].counts.device
        read = torch.cat([p.counts.to(device, torch.float64).reshape(-1) for p in self.pending])
        values = read.tolist()
        out, at = [], 0
        for p in self.pending:
            shares, predicted = [], []
            width = p.counts.shape[1]
            for position in p.positions:
                under, live = values[at], values[at + 1]
                if width > 2:
                    predicted.append((position, values[at + 2] ** 0.5))
                at += width
                if live > 0:
                    shares.append((position, under / live, int(live)))
            out.append(
                EpsSample(p.optimizer, p.step, p.eps, tuple(shares), p.known, tuple(predicted))
            )
        self.pending = []
        return out


def _group(
    tracked: discover.Tracked,
    optimizer: Any,
    group: dict[str, Any],
    counted: dict[int, Any],
    known: bool,
    step: int,
) -> tuple[float, list[int], torch.Tensor] | None:
    """(eps, positions, [k, 2] counts) of a group with Adam's state (its rule known, or a
    class whose update rules/adam_measured.py will check: [k, 3] at a VERIFY step)."""
    got = adam_state(tracked, optimizer, group, any_class=True)
    if got is None:
        return None
    eps, positions, parts = got
    counts = [
        counted[i].to(torch.int64) if i in counted else eps_counts(v, floor)
        for i, (v, floor, _) in zip(positions, parts, strict=True)
    ]
    if known or step > VERIFY:
        return eps, positions, torch.stack(counts)
    params = {tracked.index[id(p)]: p for p in group["params"] if id(p) in tracked.index}
    rows = [
        torch.cat(
            [c.to(torch.float64), adam_update_sq(optimizer.state[params[i]], part, eps, group)]
        )
        for i, c, part in zip(positions, counts, parts, strict=True)
    ]
    return eps, positions, torch.stack(rows)


StatePart = tuple[torch.Tensor, Any, Any]
"""(v, the floor eps²·(1 - β2^t) of √v̂ < eps, 1 - β2^t: a float or a 0-dim tensor)."""


def adam_state(
    tracked: discover.Tracked, optimizer: Any, group: dict[str, Any], any_class: bool = False
) -> tuple[float, list[int], list[StatePart]] | None:
    """(eps, positions, per tracked parameter with a state its StatePart) of a group of an
    optimizer whose update is Adam's (optim_known: eps and betas on the host, a second
    moment per parameter); None for any other, whatever its keys (Prodigy's exp_avg_sq
    holds d²-scaled moments under a denominator √v + d·eps); `any_class`: whatever the
    class, for a reading whose rule checks the update measured against Adam's."""
    if not any_class and not adam_rule(optimizer):
        return None
    eps, betas = group.get("eps"), group.get("betas")
    if not isinstance(eps, (int, float)) or isinstance(eps, bool) or eps <= 0:
        return None
    if not isinstance(betas, (tuple, list)) or not isinstance(betas[1], (int, float)):
        return None
    key = "max_exp_avg_sq" if group.get("amsgrad") else "exp_avg_sq"
    positions, parts = [], []
    for p in group["params"]:
        state = optimizer.state.get(p) if id(p) in tracked.index else None
        if not state or not isinstance(state.get(key), torch.Tensor) or "step" not in state:
            continue
        v = local(state[key])
        if v.is_complex():  # Adam steps a complex tensor as its real view: v per part
            v = torch.view_as_real(v)
        t = step_count(state, v)
        bias = 1 - betas[1] ** t
        parts.append((v, bias * (eps * eps), bias))  # √v̂ < eps  ⇔  v < eps²·(1 - β2^t)
        positions.append(tracked.index[id(p)])
    if not parts:
        return None
    return float(eps), positions, parts


def step_count(state: dict[str, Any], v: torch.Tensor) -> Any:
    """The state's step count: a float where it is on the host (torch's default, read
    for free; a copy of it to an accelerator would wait for the device), else a float64
    0-dim tensor where it lives (capturable, fused: never read back)."""
    t = state["step"]
    if not isinstance(t, torch.Tensor):
        return float(t)
    if t.device.type == "cpu":
        return float(t.item())
    return t.to(v.device, torch.float64)


def adam_update_sq(
    state: dict[str, Any], part: StatePart, eps: float, group: dict[str, Any]
) -> torch.Tensor:
    """[1]: Σ û², û = m̂/(√v̂ + eps), Adam's update over the lr from this state; NaN
    where the state has no first moment."""
    v, _, bias = part
    m = state.get("exp_avg")
    beta1 = group["betas"][0]
    if not isinstance(m, torch.Tensor) or m.shape != v.shape or not isinstance(beta1, (int, float)):
        return torch.full((1,), float("nan"), dtype=torch.float64, device=v.device)
    first = 1 - beta1 ** step_count(state, v)
    with torch.no_grad():
        u = (local(m).to(torch.float64) / first) / ((v.to(torch.float64) / bias).sqrt() + eps)
        return u.square().sum().reshape(1)


def eps_counts(v: torch.Tensor, floor: Any) -> torch.Tensor:
    """[2]: elements with 0 < v < floor, elements with v > 0 (on the device; v ≥ 0, and
    count_nonzero is twice as fast as a sum of masks on a CPU)."""
    with torch.no_grad():
        live = torch.count_nonzero(v)
        return torch.stack([torch.count_nonzero(v < floor) - (v.numel() - live), live])
