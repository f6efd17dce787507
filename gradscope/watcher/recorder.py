"""Per-step statistics kept as device tensors, read back every `flush_every` steps.

The interception (stepping.py, manual.py) hands one `PendingStep` per optimizer step to
`Recorder.add`; nothing in the step reads a value back to the host. Every
`flush_every` steps (no more often than MIN_FLUSH_INTERVAL_S, except with finalisers),
and at the end, `Recorder.flush` concatenates everything
pending into one tensor, calls the `finalisers` on the per-parameter squared norms,
does the one `.tolist()`, and turns the numbers into plain `StepRecord`s that
it passes to `on_records` (the --log streamer).

Two hook points, lists that whoever extends the recorder appends to (distributed runs:
watcher/distributed_hooks.py), called in order:

- `on_add`: each `PendingStep` as it arrives, before it is queued (may change it);
- `finalisers`: each receives a [rows, params] float tensor of squared per-parameter
  norms of this process (a row of gradient norms per step, then an update row and a
  weight row per sampled step; -1 where not measured) and returns the global ones (e.g.
  one all-reduce SUM over the ranks that hold shards). None: the identity.
"""

from __future__ import annotations

import math
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import torch

from gradscope.steps.records import StepRecord
from gradscope.steps.step_store import StepStore
from gradscope.watcher.signals_held import ctrl_c_held

NAN = float("nan")
NO_GRAD = -1.0
"""The norm (and squared norm) recorded for a parameter whose grad is None."""


@dataclass
class PendingStep:
    """One step's values, most still on the device (a tensor) or already plain (a float)."""

    step: int
    optimizer: int
    lrs: tuple[float, ...]
    backward_calls: int
    skipped: bool | torch.Tensor
    param_norm: torch.Tensor
    """[P] gradient norms before clipping, unscaled; -1 where grad was None."""
    loss: torch.Tensor | float | None = None
    grad_norm: torch.Tensor | None = None
    """The script's own total norm (clip_grad_norm_'s or get_total_norm's return, in its
    `norm_type`, unscaled); None: the script computed none. The recorded L2 `grad_norm`
    is always the stepping optimizer's, from param_norm."""
    max_norm: float | None = None
    norm_type: float | None = None
    """The norm the script's clip (or get_total_norm) used: 2.0, inf, ..."""
    scaled_clip: bool = False
    """The script clipped gradients still multiplied by the loss scale `clip_scale`
    (grad_norm and param_norm are divided by it already)."""
    clip_scale: torch.Tensor | None = None
    scale: torch.Tensor | None = None
    carried: torch.Tensor | None = None
    update_norm: torch.Tensor | None = None
    """[P] update norms ‖Δw‖ (measured steps; -1 where not measured)."""
    weight_norm: torch.Tensor | None = None
    """[P] weight norms after the update (sampled steps)."""
    time_s: float = 0.0
    members: tuple[int, ...] | None = None
    """Positions of the stepping optimizer's parameters: the total norm (when the script
    did not clip) is theirs; None: all."""
    zeroed: bool = False
    """A zero_grad cleared the gradients after the step's backward calls, before it."""
    wiped: int | None = None
    """The first backward calls of the step whose gradients a reset cleared before
    its later ones (None: none)."""
    rewritten: bool = False
    """With `wiped`: the step's `.grad` was assigned a new tensor after its last backward."""
    input_added: bool = False
    """Its first backward call was made for an input's gradient, its last was not, and
    no reset came between (resets.input_added)."""
    reapplied: bool = False
    """No backward since the previous step and `.grad` still the gradients that step
    applied, untouched (reapplied.py)."""
    written: bool = False
    """An optimizer wrapper assigned `.grad` from its own buffer inside its step
    (wrapped_steps.py)."""
    micro: torch.Tensor | None = None
    """[P] Σ over this rank's micro-batch gradients of each parameter's squared norm
    (noise_scale.py); None: not measured."""
    micro_calls: int = 0
    """The backward calls `micro` sums over."""
    micro_ranks: int = 1
    """Data-parallel ranks whose gradients the step's gradient averages (DDP)."""
    batch_samples: int | None = None


MIN_FLUSH_INTERVAL_S = 0.05
"""A read-back at most this often: steps of a fraction of a millisecond would otherwise
read back (and build their records) hundreds of times a second. Never in a run with
finalisers: their read-backs are collective and fall on the same steps on every rank."""

Finaliser = Callable[[torch.Tensor], torch.Tensor]
StepHook = Callable[[PendingStep], None]


class Scalars(NamedTuple):
    """The numbers each step sends besides its norm rows, in this order (NaN: none)."""

    loss: float
    script_total: float
    """The script's own total norm (`PendingStep.grad_norm`)."""
    scale: float
    carried: float
    found_inf: float
    clip_scale: float

    @classmethod
    def of(cls, p: PendingStep) -> tuple[Any, ...]:
        """The step's values, device tensors and all, in the fields' order."""
        skipped = p.skipped if isinstance(p.skipped, torch.Tensor) else None
        return (p.loss, p.grad_norm, p.scale, p.carried, skipped, p.clip_scale)


class Recorder:
    """Collects PendingSteps; `records` holds what has been read back so far."""

    def __init__(
        self,
        flush_every: int = 16,
        finalise: Finaliser | None = None,
        on_records: Callable[[list[StepRecord]], None] | None = None,
    ) -> None:
        self.flush_every = max(1, flush_every)
        self.finalisers: list[Finaliser] = [finalise] if finalise is not None else []
        self.on_add: list[StepHook] = []
        self.on_records = on_records
        self.pending: list[PendingStep] = []
        self.records = StepStore()
        """Every step read back so far, in columns (per-tensor detail bounded)."""
        self.width = 0
        """Number of tracked parameters (vectors of older steps are padded to it)."""
        self._flushed_at = time.perf_counter()
        self._lock = threading.RLock()
        """Steps come from any thread of the script; the end of the watch flushes."""
        self.hurry = False
        """Read back with the next step added, whatever is pending (nan_probe.early)."""

    def add(self, step: PendingStep) -> None:
        with self._lock:
            for hook in self.on_add:
                hook(step)
            self.pending.append(step)
            if self.hurry or (len(self.pending) >= self.flush_every and self._due()):
                self.hurry = False
                self.flush()

    def _due(self) -> bool:
        """flush_every steps pend: read them back unless the last read-back was under
        MIN_FLUSH_INTERVAL_S ago (up to 100 × flush_every steps)."""
        if self.finalisers or len(self.pending) >= 100 * self.flush_every:
            return True
        return time.perf_counter() - self._flushed_at >= MIN_FLUSH_INTERVAL_S

    def flush(self) -> None:
        """One host read-back for everything pending.

        Ctrl-C is held until the records and the --log agree, so an interrupted run
        never reports steps its log lacks (or drops steps it had read back).
        """
        with self._lock:
            if not self.pending:
                return
            with ctrl_c_held():
                self._flush()

    def _flush(self) -> None:
        pending = self.pending
        width = max([self.width, *(_width(p) for p in pending)])
        self.width = width
        device = pending[0].param_norm.device
        rows = [_pad(p.param_norm, width, device) for p in pending]
        for p in pending:  # sampled steps: update and weight norms, finalised alike
            if p.update_norm is not None and p.weight_norm is not None:
                rows += [_pad(p.update_norm, width, device), _pad(p.weight_norm, width, device)]
        norms = torch.stack(rows).to(_wide(device))  # float64: 1e20 squares to 1e40
        if self.finalisers:  # they take and give squares (a sum over ranks' shards)
            sq = torch.where(norms >= 0, norms.square(), norms)
            for finalise in self.finalisers:
                sq = finalise(sq)
            norms = torch.where(sq >= 0, sq.sqrt(), sq)
        slots, tensors = _scalars(pending, device)
        micro = [_pad(p.micro, width, device) for p in pending if p.micro is not None]
        parts = [norms.reshape(-1), *tensors, *micro]  # micro: noise_scale.py's sums
        read = torch.cat(parts).tolist()  # cat widens every part to the widest, float64
        at = norms.numel() + len(tensors)
        values = read[: norms.numel()] + _filled(slots, read[norms.numel() : at]) + read[at:]
        records = _records(pending, values, width)
        if micro:
            records = _with_micro(records, pending, values[-len(micro) * width :], width)
        self.records.extend(records)
        self.pending = []
        self._flushed_at = time.perf_counter()
        if self.on_records is not None:
            self.on_records(records)


def _width(p: PendingStep) -> int:
    """The most tracked parameters any of the step's vectors covers: a model found at the
    step's end (a reference or copy handed to the optimizer late) widens its update and
    weight norms, measured after the gradient norms."""
    vectors = (p.param_norm, p.update_norm, p.weight_norm, p.micro)
    return max(int(v.numel()) for v in vectors if v is not None)


def _wide(device: torch.device) -> torch.dtype:
    return torch.float32 if device.type == "mps" else torch.float64


def _pad(t: torch.Tensor, width: int, device: torch.device) -> torch.Tensor:
    """`t` on `device`, -1 up to `width` (its dtype as it is: the stack widens)."""
    t = (t.detach() if t.requires_grad else t).to(device)
    if t.numel() == width:
        return t
    filler = torch.full((width - t.numel(),), NO_GRAD, device=device, dtype=t.dtype)
    return torch.cat([t, filler])


def _scalar(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A device scalar as one element to read back (a complex one's real part)."""
    if t.requires_grad:
        t = t.detach()
    if t.is_complex():
        t = t.real
    return (t.reshape(1) if t.dim() == 0 else t.reshape(-1)[:1]).to(device)


def _scalars(
    pending: list[PendingStep], device: torch.device
) -> tuple[list[float | None], list[torch.Tensor]]:
    """Every step's `Scalars`, in their order: plain numbers as they are (NaN: none),
    and None in the slot of each device tensor, which is read back with the norms."""
    narrow = _wide(device) == torch.float32  # what a float32 read-back would give
    slots: list[float | None] = []
    tensors: list[torch.Tensor] = []
    for p in pending:
        for x in Scalars.of(p):
            if isinstance(x, torch.Tensor):
                slots.append(None)
                tensors.append(_scalar(x, device))
            elif x is None:
                slots.append(NAN)
            else:
                slots.append(_float32(float(x)) if narrow else float(x))
    return slots, tensors


def _filled(slots: list[float | None], read: list[float]) -> list[float]:
    """The slots with the values read back in place of the tensors."""
    values = iter(read)
    return [next(values) if v is None else v for v in slots]


def _float32(value: float) -> float:
    return struct.unpack("f", struct.pack("f", value))[0]


def _none_if_nan(v: float) -> float | None:
    return None if math.isnan(v) else v


def _records(pending: list[PendingStep], values: list[float], width: int) -> list[StepRecord]:
    """`values`: norm rows (one per step, then update and weight rows of each sampled
    step; -1: not measured), then the `Scalars` of each step."""
    n = len(pending)
    sampled = sum(p.update_norm is not None and p.weight_norm is not None for p in pending)
    rows = [values[i * width : (i + 1) * width] for i in range(n + 2 * sampled)]
    updates = iter(rows[n:])
    at = (n + 2 * sampled) * width
    count = len(Scalars._fields)
    out = []
    for p, row in zip(pending, rows[:n], strict=True):
        got = Scalars._make(values[at : at + count])
        at += count
        ratios, update_norm = _updates(p, updates)
        norms = tuple([None if v < 0 else v for v in row])
        members = p.members  # distinct positions below width: all of them when as many
        own = row if members is None or len(members) == width else [row[i] for i in members]
        total = math.sqrt(sum([v * v for v in own if not v < 0]))  # the optimizer's; NaN stays
        clip_total = None if p.grad_norm is None else got.script_total
        skipped = p.skipped if isinstance(p.skipped, bool) else got.found_inf > 0
        clipped = _clipped(p, total, clip_total, got.clip_scale)
        out.append(
            StepRecord(
                step=p.step,
                optimizer=p.optimizer,
                loss=got.loss if p.loss is not None else None,
                grad_norm=total,
                clipped_norm=clipped,
                max_norm=p.max_norm,
                lrs=p.lrs,
                backward_calls=p.backward_calls,
                scale=_none_if_nan(got.scale),
                skipped=bool(skipped),
                carried_norm=_none_if_nan(got.carried),
                param_norms=norms,
                update_ratios=ratios,
                update_norm=update_norm,
                time_s=p.time_s,
                scaled_clip=p.scaled_clip,
                clip_total=clip_total,
                norm_type=p.norm_type if p.max_norm is not None or clip_total is not None else None,
                clip_scale=_none_if_nan(got.clip_scale) if p.scaled_clip else None,
                **{name: getattr(p, name) for name in CALL_ORDER},
            )
        )
    return out


CALL_ORDER = ("zeroed", "wiped", "rewritten", "input_added", "reapplied", "written")
"""What the step's calls told of its backward calls and `.grad` (kept as the hooks read them)."""


def _updates(
    p: PendingStep, updates: Iterator[list[float]]
) -> tuple[tuple[float, ...] | None, float | None]:
    """A sampled step's update/weight ratios and its total update norm (None where a tensor
    of its optimizer was not measured); (None, None) for a step not sampled."""
    if p.update_norm is None or p.weight_norm is None:
        return None, None
    upd, wts = next(updates), next(updates)
    ratios = tuple(_ratio(u, w) for u, w in zip(upd, wts, strict=True))
    own = upd if p.members is None else [upd[i] for i in p.members if i < len(upd)]
    if any(u < 0 for u in own):  # a total only where every tensor was measured
        return ratios, None
    return ratios, math.sqrt(sum(u * u for u in upd if not u < 0))


def _clipped(
    p: PendingStep, total: float, clip_total: float | None, clip_scale: float
) -> float | None:
    """The norm after the script's clip (None: it did not clip)."""
    if p.max_norm is None:
        return None
    seen = total if clip_total is None else clip_total  # what the clip compared
    if p.scaled_clip and math.isfinite(clip_scale):
        seen *= clip_scale
    if math.isfinite(total) and math.isfinite(seen):
        return total * min(1.0, p.max_norm / (seen + 1e-6))
    return total


def _with_micro(
    records: list[StepRecord], pending: list[PendingStep], values: list[float], width: int
) -> list[StepRecord]:
    """The records with the noise scale's numbers (steps/noise.py). `values`: a [P] row
    of this process's micro-batch sums per step that has one. Its k micro-batch gradients
    h_i, times k, average with the other ranks' to the step's gradient (DDP averages
    over W ranks): K = k·W of them, and this rank's k are an unbiased sample of
    |g_j|², mean k·Σ|h_i|² (no collective: rank 0 reports)."""
    rows = iter(range(0, len(values), width))
    out = []
    for r, p in zip(records, pending, strict=True):
        if p.micro is None:
            out.append(r)
            continue
        at = next(rows)
        present = [v is not None for v in r.param_norms]
        per = tuple(
            p.micro_calls * v if seen else NO_GRAD
            for v, seen in zip(values[at : at + width], present, strict=False)
        )
        own = range(len(per)) if p.members is None else p.members
        total = p.micro_calls * p.micro_ranks
        micro_sq = sum(per[j] for j in own if j < len(per) and per[j] >= 0)
        if total < 2:
            out.append(r)
            continue
        out.append(
            replace(
                r,
                batch_samples=p.batch_samples,
                micro_batches=total,
                micro_sq=micro_sq,
                micro_param_sq=per,
            )
        )
    return out


def _ratio(update: float, weight: float) -> float:
    if update < 0 or weight < 0:
        return NAN
    if weight == 0:
        return 0.0 if update == 0 else math.inf
    return update / weight
