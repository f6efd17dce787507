"""Per tensor, Adam's own RMS_t and update RMS against the lr, read from its state at the
steps whose update is measured (updates.py's sampled steps: every one after the first 100,
one in EARLY_EVERY of those, each of which is measured).

After the step, with v̂ = v/(1 - β2^t) and m̂ = m/(1 - β1^t), each tensor's
- RMS_t = √mean(g²/max(v̂, eps²)): StableAdamW's, about 1 on a healthy step, far above
  where √v̂ lags a sudden large gradient;
- update RMS over the lr, √mean((m̂/(√v̂ + eps))²): Adam's update without its decay,
  normally 0.2-0.3 (its jump is the same lag seen in the step it took);
- the share of its elements with v > 0 where √v̂ < eps (counted as adam_eps.py counts).
Computed on the device in flat pieces of PIECE elements; every sample is read back once,
when the run ends (`facts`): no sync in a step.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import torch

from gradscope.distributed.norms import local
from gradscope.steps.state_facts import StateSample
from gradscope.watcher import adam_rms_batch as batched
from gradscope.watcher import discover
from gradscope.watcher.adam_eps import adam_state, eps_counts, step_count
from gradscope.watcher.measure import norms
from gradscope.watcher.updates import DENSE_STEPS

EARLY_EVERY = 50
"""In the first DENSE_STEPS steps (each of whose updates is measured): one in 50, half the
rate of the later steps at the default --update-every (a sample costs about a fifth of a
0.4M-parameter char-LM's CPU step, a third of a 10M-parameter GPT's: four in the first 100
steps were 2.7 ms of gradscope's 15 ms a step there)."""
FIRST, LAST = 64, 448
"""Samples kept: the first ones, and the latest ones after them."""
PIECE = 2**20
"""Elements per piece of a tensor's temporaries."""


def sampled(step: int) -> bool:
    """Of the steps whose update is measured, those read here."""
    return step > DENSE_STEPS or step % EARLY_EVERY == 0


@dataclass
class Pending:
    optimizer: int
    step: int
    positions: list[int]
    values: torch.Tensor
    """[k, 5]: per parameter Σ g²/max(v̂, eps²), Σ û², elements, under eps, v > 0."""


@dataclass
class AdamRms:
    first: list[Pending] = field(default_factory=list)
    last: deque[Pending] = field(default_factory=lambda: deque(maxlen=LAST))

    def observe(
        self, tracked: discover.Tracked, index: int, optimizer: Any, step: int
    ) -> dict[int, torch.Tensor]:
        """After optimizer `index`'s step `step`, one whose update was measured: per
        position sampled, its eps counts ([2]: under eps, v > 0), for adam_eps.py to
        take rather than count again."""
        counted: dict[int, torch.Tensor] = {}
        if not sampled(step):
            return counted
        for group in optimizer.param_groups:
            got = _group(tracked, optimizer, group)
            if got is None:
                continue
            pending = Pending(index, step, got[0], got[1])
            (self.first if len(self.first) < FIRST else self.last).append(pending)
            counted.update(zip(pending.positions, pending.values[:, 3:].unbind(), strict=True))
        return counted

    def facts(self) -> list[StateSample]:
        """Every sample, read back in one go."""
        pending = [*self.first, *self.last]
        if not pending:
            return []
        device = pending[0].values.device
        read = torch.cat([p.values.to(device).reshape(-1) for p in pending]).tolist()
        out, at = [], 0
        for p in pending:
            rows = []
            for position in p.positions:
                rms, update, n, under, live = read[at : at + 5]
                at += 5
                if n > 0:
                    share = under / live if live > 0 else 0.0
                    rows.append((position, (rms / n) ** 0.5, (update / n) ** 0.5, share))
            out.append(StateSample(p.optimizer, p.step, tuple(rows)))
        self.first, self.last = [], deque(maxlen=LAST)
        return out


def _group(
    tracked: discover.Tracked, optimizer: Any, group: dict[str, Any]
) -> tuple[list[int], torch.Tensor] | None:
    """(positions, [k, 5] values) of an Adam-family group's parameters with a gradient."""
    got = adam_state(tracked, optimizer, group)
    if got is None:
        return None
    eps, positions, parts = got
    beta1 = group["betas"][0]
    if not isinstance(beta1, (int, float)):
        return None
    by_position = {tracked.index[id(p)]: p for p in group["params"] if id(p) in tracked.index}
    kept, rows, batch = [], [], []
    with torch.no_grad():
        for position, (v, floor, bias) in zip(positions, parts, strict=True):
            p = by_position[position]
            m = optimizer.state[p].get("exp_avg")
            g = p.grad
            if g is None or g.is_sparse or g.is_complex() or not isinstance(m, torch.Tensor):
                continue
            first = 1 - beta1 ** step_count(optimizer.state[p], v)
            g, m = local(g), local(m)
            if batched.batchable(g, m, v, floor, bias, first, PIECE):
                batch.append((position, g, m, v, floor, bias, first))
                continue
            try:
                sums = _sums(g, m, v, bias, first, eps)
            except (RuntimeError, TypeError, ValueError):  # a state of another shape (loaded)
                continue
            n = torch.full((1,), float(v.numel()), dtype=sums.dtype, device=v.device)
            rows.append(torch.cat([sums, n, eps_counts(v, floor).to(sums.dtype)]).reshape(1, 5))
            kept.append(position)
        for chunk in batched.chunks(batch, PIECE):
            rows.append(batched.rows(chunk, eps))
            kept.extend(item[0] for item in chunk)
    return (kept, torch.cat(rows)) if rows else None


def _sums(
    g: torch.Tensor, m: torch.Tensor, v: torch.Tensor, bias: Any, first: Any, eps: float
) -> torch.Tensor:
    """[2]: Σ g²/max(v̂, eps²) and Σ (m̂/(√v̂ + eps))², over flat pieces (rows where a
    tensor is not contiguous): with r = √(1 - β2^t), √v̂ = √v/r, so the squared norms of
    r·g/max(√v, r·eps) and r·m/(√v + r·eps), from one √v per piece (no division of v by
    the bias first: a pass fewer), in two temporaries."""
    total = torch.zeros(2, dtype=torch.float64, device=v.device)
    wide = v.dtype if v.dtype in (torch.float32, torch.float64) else torch.float32
    root_bias = bias**0.5
    floor = eps * root_bias
    for gp, mp, vp in zip(_pieces(g), _pieces(m), _pieces(v), strict=True):
        root = torch.sqrt(vp.to(wide))
        scaled = torch.clamp_min(root, floor)
        torch.div(gp.to(wide), scaled, out=scaled)
        torch.div(mp.to(wide), root.add_(floor), out=root)
        rms, update = norms([scaled, root])
        total += torch.stack([rms * root_bias, update * root_bias / first]).square()
    return total


def _pieces(t: torch.Tensor) -> tuple[torch.Tensor, ...]:
    if t.is_contiguous():
        return t.reshape(-1).split(PIECE)
    rows = max(1, PIECE // max(1, t[0].numel())) if t.dim() else 1
    return t.split(rows) if t.dim() else (t,)
