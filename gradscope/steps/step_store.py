"""The steps of a watched run, stored in columns: a few numbers per step, no object.

`StepStore` is what `WatchRun.steps` holds. Each step's totals (loss, norms, clip fields,
learning rates, flags, time) go into columns of runs of equal values (columns.py), so a
step costs the numbers that changed in it (the loss, gradient norm and time: 24 bytes)
whatever the model's size, and every step reads back exactly; a step's learning rates
are stored again only when they change. Its per-tensor norms and update ratios go to two
bounded `Decimated` stores (every step, and the sampled steps), and to `TensorTrack`'s
running aggregates. Reading `store[i]` builds the `StepRecord` the rules and reporters
see; its `param_norms` are there when that step's detail was kept (`detail` True), else
empty.
"""

from __future__ import annotations

import heapq
import math
import statistics
from array import array
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, overload

from gradscope.steps.columns import StepColumn
from gradscope.steps.detail import DETAIL_STEPS, NO_GRAD, Decimated, Row
from gradscope.steps.layer_spikes import LayerSpikes
from gradscope.steps.noise import LayerNoise
from gradscope.steps.step_record import StepRecord
from gradscope.steps.tensor_track import TensorTrack

_LOSS, _SKIPPED, _CLIPPED, _MAX, _SCALE, _CARRIED = 1, 2, 4, 8, 16, 32
_UPDATE, _SCALED_CLIP, _TOTAL, _NORM_TYPE, _CLIP_SCALE = 64, 128, 256, 512, 1024
_ZEROED, _MICRO_SQ, _SAMPLES, _WIPED = 2048, 4096, 8192, 16384
_INPUT_ADDED, _REAPPLIED, _REWRITTEN, _WRITTEN = 32768, 65536, 131072, 262144
_MISSING = math.nan
"""A missing value: always this one object, so that a batch of them is counted in C."""

_View = tuple[tuple[Any, ...], list[tuple[int, str, Any]]]
"""What `_build` reads: the plain columns, then (flag, name, column) of the optional."""

JUMPS_KEPT = 16
"""Per optimizer, the steps whose gradient norm rose most above the median of the
JUMP_WINDOW steps before it keep their per-tensor detail: a GS403 spike names the
layers that drove it from that step's norms."""
JUMP_WINDOW = 32

_OPTIONAL = (  # (flag, StepRecord field) of the float fields that may be None
    (_LOSS, "loss"),
    (_CLIPPED, "clipped_norm"),
    (_MAX, "max_norm"),
    (_SCALE, "scale"),
    (_CARRIED, "carried_norm"),
    (_UPDATE, "update_norm"),
    (_TOTAL, "clip_total"),
    (_NORM_TYPE, "norm_type"),
    (_CLIP_SCALE, "clip_scale"),
    (_MICRO_SQ, "micro_sq"),
    (_SAMPLES, "batch_samples"),
    (_WIPED, "wiped"),
)


class StepStore(Sequence[StepRecord]):
    """Every step's totals, and per-tensor detail at a bounded number of steps."""

    def __init__(self, detail_steps: int = DETAIL_STEPS) -> None:
        self.width = 0
        """Tensors tracked: records read back are padded to it."""
        self._step = StepColumn[int]("q")
        """Per step: its number less its index (one run while steps count up by one)."""
        self._optimizer = StepColumn[int]("i")
        self._calls = StepColumn[int]("q")
        self._micro = StepColumn[int]("q")
        self._flags = StepColumn[int]("i")
        self._grad_norm = StepColumn[float]()
        self._time = StepColumn[float]()
        self._optional = {name: StepColumn[float]() for _, name in _OPTIONAL}
        self._columns = [(flag, name, self._optional[name]) for flag, name in _OPTIONAL]
        self._lr_at = StepColumn[int]("q")
        """Per step: where its learning rates start in `_lrs` (a repeat shares them)."""
        self._lr_count = StepColumn[int]("i")
        self._lrs = array("d")
        self._last_lrs: tuple[float, ...] | None = None
        self._last_at = 0
        self._first_bad = -1
        self.detail = Decimated(detail_steps)
        """Per-tensor norms (and ratios on sampled steps) at a bounded set of steps."""
        self.sampled = Decimated(detail_steps)
        """The sampled steps' rows, decimated among themselves (so that the update
        ratios keep as many steps as the norms)."""
        self.track = TensorTrack()
        self._recent: dict[int, deque[float]] = {}
        self._jumps: dict[int, list[tuple[float, int]]] = {}
        """Per optimizer, a min-heap of (norm / recent median, store index)."""
        self._held: list[StepRecord] | None = None
        """While `held()`: every step's record, built once for the rules' many passes."""
        self.noise = LayerNoise()
        """Per tensor, the moving averages of the noise scale's two estimates."""
        self.layers = LayerSpikes()
        """Per optimizer, the largest jumps of a tensor's norm above its own median."""

    @classmethod
    def of(
        cls, records: Iterable[StepRecord], width: int = 0, detail_steps: int = DETAIL_STEPS
    ) -> StepStore:
        store = cls(detail_steps)
        store.extend(records)
        store.widen(width)
        return store

    def widen(self, width: int) -> None:
        self.width = max(self.width, width)

    def outline(self, start: int) -> list[tuple[int, bool, float, bool]]:
        """(step, skipped, loss or NaN, the first step GS401 looks for) of the steps from
        index `start`, read off the columns (no record built): what the NaN probe
        watches for as records arrive."""
        loss = self._optional["loss"]
        return [
            (self._step[i] + i, bool(self._flags[i] & _SKIPPED), loss[i], i == self._first_bad)
            for i in range(start, len(self._step))
        ]

    # -- writing ------------------------------------------------------------------------
    def extend(self, records: Iterable[StepRecord], restored: bool = False) -> None:
        """Store the steps: their numbers column by column, their detail one by one.
        `restored`: a checkpoint's steps, read from a store, some without their detail
        (its per-tensor aggregates then lack those steps, as the earlier report's did)."""
        batch = list(records)
        if not batch:
            return
        for r in batch:
            if not r.detail and not restored:  # every aggregate would miss its tensors
                raise ValueError(
                    f"step {r.step} was read back without its per-tensor detail: store the "
                    "run's StepStore itself, not records read from it"
                )
        start = len(self)
        flags = [_SKIPPED if r.skipped else 0 for r in batch]
        for k, r in enumerate(batch):
            flags[k] |= (_SCALED_CLIP if r.scaled_clip else 0) | (_ZEROED if r.zeroed else 0)
            flags[k] |= _INPUT_ADDED if r.input_added else 0
            flags[k] |= _REAPPLIED if r.reapplied else 0
            flags[k] |= _REWRITTEN if r.rewritten else 0
            flags[k] |= _WRITTEN if r.written else 0
        for flag, name, column in self._columns:
            values = [getattr(r, name) for r in batch]
            for k, v in enumerate(values):
                if v is None:
                    values[k] = _MISSING
                else:
                    flags[k] |= flag
            column.extend(values)
        self._step.extend([r.step - start - k for k, r in enumerate(batch)])
        self._optimizer.extend([r.optimizer for r in batch])
        self._calls.extend([r.backward_calls for r in batch])
        self._micro.extend([r.micro_batches for r in batch])
        self._grad_norm.extend([r.grad_norm for r in batch])
        self._time.extend([r.time_s for r in batch])
        self._flags.extend(flags)
        self._add_lrs(batch)
        for k, r in enumerate(batch):
            if r.detail:
                self._add_detail(start + k, r)

    def append(self, r: StepRecord) -> None:
        self.extend((r,))

    def _add_detail(self, index: int, r: StepRecord) -> None:
        norms = array("d", [NO_GRAD if v is None else v for v in r.param_norms])
        self.width = max(self.width, len(norms))
        row = Row(norms, None if r.update_ratios is None else array("d", r.update_ratios))
        pin = self._first_bad < 0 and _non_finite(r, norms)
        if pin:
            self._first_bad = index
        self.detail.offer(index, r.optimizer, row, pin)
        if row.ratios is not None:
            self.sampled.offer(index, r.optimizer, row)
        if not r.skipped:
            self.noise.add(r)
            self.track.add(r.step, r.optimizer, norms)
            self.layers.add(r.step, r.optimizer, norms, r.grad_norm)
            self._keep_jump(index, r)

    def _keep_jump(self, index: int, r: StepRecord) -> None:
        """Pin the row of one of the largest jumps of the norm so far (see JUMPS_KEPT)."""
        if not (math.isfinite(r.grad_norm) and r.grad_norm > 0):
            return
        recent = self._recent.setdefault(r.optimizer, deque(maxlen=JUMP_WINDOW))
        base = statistics.median(recent) if len(recent) >= 3 else 0.0
        recent.append(r.grad_norm)
        if base <= 0:
            return
        jumps = self._jumps.setdefault(r.optimizer, [])
        jump = (r.grad_norm / base, index)
        if len(jumps) < JUMPS_KEPT:
            heapq.heappush(jumps, jump)
        elif jump > jumps[0]:
            _, gone = heapq.heapreplace(jumps, jump)
            if gone != self._first_bad:
                self.detail.unpin(gone)
        else:
            return
        self.detail.pinned.add(index)

    def _add_lrs(self, batch: list[StepRecord]) -> None:
        """Each step's learning rates, stored again only when they change."""
        at, count = [], []
        for r in batch:
            if r.lrs != self._last_lrs:
                self._last_lrs = r.lrs
                self._last_at = len(self._lrs)
                self._lrs.extend(r.lrs)
            at.append(self._last_at)
            count.append(len(r.lrs))
        self._lr_at.extend(at)
        self._lr_count.extend(count)

    def nbytes(self) -> int:
        """Bytes the per-step columns hold (the per-tensor detail is bounded apart)."""
        columns: list[StepColumn[Any]] = [self._step, self._optimizer, self._calls, self._micro]
        columns += [self._flags, self._grad_norm, self._time, self._lr_at, self._lr_count]
        columns += self._optional.values()
        return sum(c.nbytes() for c in columns) + self._lrs.__sizeof__()

    # -- reading ------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._step)

    @overload
    def __getitem__(self, index: int) -> StepRecord: ...

    @overload
    def __getitem__(self, index: slice) -> list[StepRecord]: ...

    def __getitem__(self, index: int | slice) -> StepRecord | list[StepRecord]:
        if isinstance(index, slice):
            return [self._record(i) for i in range(*index.indices(len(self)))]
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError("step index out of range")
        return self._record(index)

    def __iter__(self) -> Iterator[StepRecord]:
        for i in range(len(self)):
            yield self._record(i)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"StepStore({len(self)} steps, {len(self.detail.rows)} with per-tensor detail)"

    def optimizers(self) -> set[int]:
        """Indices of the optimizers that stepped."""
        return set(self._optimizer.values())

    def of_optimizer(self, optimizer: int) -> list[StepRecord]:
        """Its steps, in order."""
        owners = self._optimizer.values()
        return [self._record(i) for i, o in enumerate(owners) if o == optimizer]

    @contextmanager
    def held(self) -> Iterator[None]:
        """While the rules judge the run: each step's record is built once and served to
        every pass over the steps, then let go (kept, they would undo the bounded
        memory)."""
        view = self._view(expanded=True)
        self._held = [self._build(i, view) for i in range(len(self))]
        try:
            yield
        finally:
            self._held = None

    def _record(self, i: int) -> StepRecord:
        return self._held[i] if self._held is not None else self._build(i, self._view())

    def _view(self, expanded: bool = False) -> _View:
        """The columns to read records from: as they are (one record), or each expanded
        into a list (every record: no search per value)."""
        plain: tuple[Any, ...] = (
            self._flags,
            self._step,
            self._optimizer,
            self._grad_norm,
            self._lr_at,
        )
        plain += (self._lr_count, self._calls, self._micro, self._time)
        optional = [(flag, name, column) for flag, name, column in self._columns]
        if not expanded:
            return plain, optional
        lists = tuple(column.values() for column in plain)
        return lists, [(flag, name, column.values()) for flag, name, column in optional]

    def _build(self, i: int, view: _View) -> StepRecord:
        (flags, step, optimizer, grad_norm, lr_at, lr_count, calls, micro, time), optional = view
        flag_set = flags[i]
        fields: dict[str, Any] = {
            name: column[i] if flag_set & flag else None for flag, name, column in optional
        }
        row = self.sampled.rows.get(i) or self.detail.rows.get(i)
        norms: tuple[float | None, ...] = ()
        ratios: tuple[float, ...] | None = None
        if row is not None:
            pad = self.width - len(row.norms)
            norms = tuple(None if v == NO_GRAD else v for v in row.norms) + (None,) * pad
            if row.ratios is not None:
                ratios = tuple(row.ratios) + (math.nan,) * (self.width - len(row.ratios))
        at = lr_at[i]
        fields.update(
            step=step[i] + i,
            optimizer=optimizer[i],
            grad_norm=grad_norm[i],
            lrs=tuple(self._lrs[at : at + lr_count[i]]),
            backward_calls=calls[i],
            micro_batches=micro[i],
            micro_param_sq=(),
            skipped=bool(flag_set & _SKIPPED),
            param_norms=norms,
            update_ratios=ratios,
            time_s=time[i],
            scaled_clip=bool(flag_set & _SCALED_CLIP),
            zeroed=bool(flag_set & _ZEROED),
            input_added=bool(flag_set & _INPUT_ADDED),
            reapplied=bool(flag_set & _REAPPLIED),
            rewritten=bool(flag_set & _REWRITTEN),
            written=bool(flag_set & _WRITTEN),
            detail=row is not None,
        )
        for name in ("batch_samples", "wiped"):
            if fields[name] is not None:
                fields[name] = int(fields[name])
        return StepRecord.stored(fields)


def _non_finite(r: StepRecord, norms: array) -> bool:
    """What GS401 looks for: a non-finite loss, or (on a step that updated) a non-finite
    total or tensor norm. The first such step's row is pinned: GS401 names its tensors."""
    if r.loss is not None and not math.isfinite(r.loss):
        return True
    if r.skipped:
        return False
    if not math.isfinite(r.grad_norm):
        return True
    # a finite sum has no NaN/inf in it (summed in C); an infinite one may be an overflow
    return not math.isfinite(sum(norms)) and not all(map(math.isfinite, norms))
