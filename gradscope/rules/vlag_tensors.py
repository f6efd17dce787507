"""Which tensors' RMS_t jumped at a step where Adam's second moment lagged (GS451). No torch.

Adam's v of a tensor is the moving average of its elements' squared gradients, so its sum
over the tensor is the moving average of the tensor's squared gradient norm:
Σv = β2·Σv + (1-β2)·‖g‖². The recorded per-tensor gradient norms give each tensor's
RMS_t, ‖g‖/√Σv̂ (the root of mean g² over mean v̂), at any step whose detail the run kept,
without reading Adam's state: GS451 names the tensors whose own RMS_t jumped.

A step whose detail the report did not keep (a long run keeps every step's up to the
detail bound, then a decimated sample: steps/step_store.py) is taken at the previous kept
step's norms; every step still decays v̂ and counts in the bias correction.
The lagged step itself is one of the total norm's largest jumps, whose detail is pinned.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from gradscope.steps.records import StepRecord
from gradscope.steps.state_facts import StateSample

SHOWN = 3
"""Tensors named at most."""


def tensor_rms_t(
    steps: Sequence[StepRecord], at: int, beta2: float, members: Sequence[int]
) -> list[tuple[int, float]]:
    """Per tensor of `members` with a gradient at step `at`: (position, ‖g‖/√Σv̂) there,
    Σv̂ the bias-corrected moving average of its squared norms (after the script's clip,
    as Adam saw them) up to and including `at`; largest first. Empty where step `at` has
    no detail."""
    v = dict.fromkeys(members, 0.0)
    last: dict[int, float] = {}
    t = gap = 0
    for r in steps:
        g = r.clipped_norm if r.clipped_norm is not None else r.grad_norm
        if r.step > at:
            break
        if r.skipped or not math.isfinite(g):
            continue
        t += 1
        if not r.param_norms:  # no detail kept: its step comes with the next kept row
            gap += 1
            continue
        scale = g / r.grad_norm if r.grad_norm > 0 else 1.0
        filled = beta2**gap  # the steps in between at the previous row's values
        for i in v:
            n = r.param_norms[i] if i < len(r.param_norms) else None
            sq = 0.0 if n is None or not math.isfinite(n) else (n * scale) ** 2
            v[i] = filled * v[i] + (1 - filled) * last.get(i, sq)
            v[i] = beta2 * v[i] + (1 - beta2) * sq
            last[i] = sq
        gap = 0
        if r.step == at:
            return _ratios(r, v, scale, 1 - beta2**t)
    return []


def _ratios(
    r: StepRecord, v: dict[int, float], scale: float, bias: float
) -> list[tuple[int, float]]:
    out = []
    for i, vi in v.items():
        n = r.param_norms[i] if i < len(r.param_norms) else None
        if n is None or not math.isfinite(n) or vi <= 0:
            continue
        out.append((i, n * scale / math.sqrt(vi / bias)))
    return sorted(out, key=lambda x: -x[1])


def lagged_tensors(
    ratios: list[tuple[int, float]], names: Sequence[str], limit: float
) -> tuple[str, list[str], list[int]]:
    """(the clause naming the tensors at or past `limit`, an evidence line per tensor, their
    positions, largest first). Where
    every tensor with a gradient is past it, the whole gradient was scaled (a loss multiplied
    by mistake, an outlier batch): no tensor is singled out."""
    ratios = [(i, x) for i, x in ratios if i < len(names)]
    over = [(i, x) for i, x in ratios if x >= limit]
    if not over:
        return "", [], []
    if len(over) == len(ratios) > 1:
        low, high = over[-1][1], over[0][1]
        spread = f"{low:.1f}×" if f"{low:.1f}" == f"{high:.1f}" else f"{low:.1f}-{high:.1f}×"
        clause = f"; every tensor's own RMS_t jumped alike ({spread}, the whole gradient scaled)"
        return clause, [f"RMS_t of each of the {len(over)} tensors: {spread}"], [i for i, _ in over]
    shown = ", ".join(f"`{names[i]}` {x:.1f}×" for i, x in over[:SHOWN])
    more = f" and {len(over) - SHOWN} more" if len(over) > SHOWN else ""
    below = max((x for _, x in ratios if x < limit), default=0.0)
    clause = f"; the tensors whose own RMS_t jumped: {shown}{more} (the others at most {below:.1f})"
    evidence = [f"RMS_t of {names[i]}: {x:.1f}" for i, x in over[:SHOWN]]
    return clause, evidence, [i for i, _ in over]


AFTER = 8
"""Steps after the lagged one within which a sample of Adam's state shows its update."""


def state_evidence(
    samples: Sequence[StateSample], at: int, positions: Sequence[int], names: Sequence[str]
) -> list[str]:
    """From Adam's state (watcher/adam_rms.py), the first sample at step `at` or within
    AFTER steps after it: each tensor of `positions`' update RMS over the lr (Adam's is
    normally 0.2-0.3; the lag's step, and the momentum's after it, are larger) against
    its median over the earlier samples, its RMS_t where the sample is the step itself,
    and its share of elements with √v̂ below eps."""
    ordered = sorted(samples, key=lambda x: x.step)
    sample = next((x for x in ordered if at <= x.step <= at + AFTER), None)
    if sample is None:
        return []
    earlier: dict[int, list[float]] = {}
    for x in ordered:
        if x.step < at:
            for i, _, update, _ in x.tensors:
                earlier.setdefault(i, []).append(update)
    out = []
    wanted = set(positions)
    for i, rms, update, share in sample.tensors:
        if i not in wanted or i >= len(names):
            continue
        before = f" (median {statistics.median(earlier[i]):.2f} before)" if i in earlier else ""
        own = f", RMS_t {rms:.1f}" if sample.step == at else ""
        under = f", √v̂ below eps for {share:.0%} of its elements" if share > 0 else ""
        out.append(
            f"Adam's state at step {sample.step}: {names[i]} update RMS {update:.2f}× the lr"
            f"{before}{own}{under}"
        )
    return out[:SHOWN]
