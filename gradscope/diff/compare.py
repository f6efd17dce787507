"""Comparing two traces: per-dtype tolerances, per-module and per-gradient differences,
and where the difference starts.

Two tensors agree when max|ref - new| <= atol + rtol * max|ref| (a max-norm relative
test: an element near zero, where rounding differences are large relative to itself,
does not decide it), or bitwise under `--exact`. NaN/Inf in the same places on both
sides agree. Every difference is computed on the device and read back in one sync.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from gradscope.diff.align import shape_text
from gradscope.diff.result import DEFAULT_SOURCE, Delta, Tolerance

DEFAULTS: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-7, 1e-12),
    torch.float32: (1e-5, 1e-7),
    torch.float16: (2e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
}
"""(rtol, atol) by dtype, for the max-norm test; the looser of the two sides' dtypes is used
(float32 against bfloat16 autocast is judged at bfloat16's). Other dtypes (integers, bool):
exact."""

GRAD_FACTOR = 10.0
"""Default rtol for gradients, times that of outputs: a weight's gradient is a sum over the
batch and the sequence, so rounding accumulates (a correct 4-layer, 256-wide GPT-2 port
differs by ~1e-5 in its gradients and ~6e-6 in its outputs). --rtol applies as given."""

_RANK = [torch.float64, torch.float32, torch.float16, torch.bfloat16]


@dataclass(frozen=True)
class Tolerances:
    """The user's override (--rtol/--atol, --exact), or the per-dtype defaults."""

    rtol: float | None = None
    atol: float | None = None
    exact: bool = False
    floor: torch.dtype | None = None
    """The lowest precision in play (the autocast dtype): every comparison is judged at it
    or looser, also of tensors that stay float32 downstream of low-precision ops."""

    def base(self) -> Tolerance:
        """What the summary states: the user's numbers or float32's."""
        if self.exact:
            return Tolerance(0.0, 0.0, True, "--exact")
        rtol, atol = DEFAULTS[self.floor or torch.float32]
        user = self.rtol is not None or self.atol is not None
        source = "--rtol/--atol" if user else DEFAULT_SOURCE
        if self.floor is not None and not user:
            source += f", at least {str(self.floor).removeprefix('torch.')}'s"
        return Tolerance(
            self.rtol if self.rtol is not None else rtol,
            self.atol if self.atol is not None else atol,
            False,
            source,
        )

    def for_dtypes(self, a: torch.dtype, b: torch.dtype, grad: bool = False) -> Tolerance:
        if self.exact:
            return Tolerance(0.0, 0.0, True, "--exact")
        if a not in DEFAULTS and b not in DEFAULTS:
            return Tolerance(0.0, 0.0, True, "exact (not floating point)")
        loosest = max((d for d in (a, b, self.floor) if d in DEFAULTS), key=_RANK.index)
        rtol, atol = DEFAULTS[loosest]
        source = str(loosest).removeprefix("torch.")
        if grad:
            rtol, source = rtol * GRAD_FACTOR, f"{source} gradient"
        if self.rtol is not None or self.atol is not None:
            source = "--rtol/--atol"
        return Tolerance(
            self.rtol if self.rtol is not None else rtol,
            self.atol if self.atol is not None else atol,
            False,
            source,
        )


def _squeezable(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Shapes that differ only by dimensions of size 1 ((1, T, D) against (T, D)) compare."""
    return a.numel() == b.numel() and a.squeeze().shape == b.squeeze().shape


def _dtype_text(a: torch.Tensor, b: torch.Tensor) -> str:
    da, db = str(a.dtype).removeprefix("torch."), str(b.dtype).removeprefix("torch.")
    return da if da == db else f"{da}→{db}"


def _stats(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """[max|a-b|, max|a|] as a float64 pair on a's device: two reductions, no copies beyond
    the difference. A non-finite result is redone with `_careful` after the read-back."""
    x, y = _wide(a, b)
    if x.numel() == 0:
        return torch.zeros(2, dtype=torch.float64, device=x.device)
    return torch.stack([(x - y).abs().amax(), x.abs().amax()]).to(torch.float64)


def _wide(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if b.device != a.device:
        b = b.to(a.device)
    if a.is_complex() or b.is_complex():  # compared as (real, imaginary) pairs
        a, b = (torch.view_as_real(t.detach().to(torch.complex128)) for t in (a, b))
    wide = torch.float64 if torch.float64 in (a.dtype, b.dtype) else torch.float32
    return a.detach().to(wide), b.detach().to(wide)


def _careful(a: torch.Tensor, b: torch.Tensor) -> list[float]:
    """`_stats` where NaN or Inf appear: in the same places on both sides they agree."""
    x, y = _wide(a, b)
    same = (x == y) | (torch.isnan(x) & torch.isnan(y))
    gap = torch.where(same, torch.zeros((), dtype=x.dtype, device=x.device), (x - y).abs())
    gap = torch.nan_to_num(gap, nan=torch.inf)
    scale = torch.nan_to_num(x.abs(), nan=0.0, posinf=0.0, neginf=0.0)
    return [float(gap.max()), float(scale.max())]


class Batch:
    """Differences queued on the device, read back together (one host sync). A pair of
    tensors met again (a call's output is the next call's input) is compared once."""

    def __init__(self, tol: Tolerances) -> None:
        self.tol = tol
        self.pending: list[torch.Tensor] = []
        self.tensors: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.slots: dict[tuple[int, int], int] = {}

    def _slot(self, a: torch.Tensor, b: torch.Tensor) -> int:
        key = (id(a), id(b))
        slot = self.slots.get(key)
        if slot is None or self.tensors[slot][0] is not a or self.tensors[slot][1] is not b:
            slot = len(self.pending)
            self.pending.append(_stats(a, b))
            self.tensors.append((a, b))
            self.slots[key] = slot
        return slot

    def pairs(
        self, ref: Sequence[torch.Tensor], new: Sequence[torch.Tensor], grad: bool = False
    ) -> Pending | None:
        """Tensors compared in order (as many as both have); the first pair's shapes must
        agree, later pairs of other shapes are skipped. None: nothing to compare."""
        if not ref or not new:
            return None
        first_a, first_b = ref[0], new[0]
        if first_a.shape != first_b.shape and not _squeezable(first_a, first_b):
            tol = self.tol.for_dtypes(first_a.dtype, first_b.dtype, grad)
            return Pending(
                [],
                [tol],
                _dtype_text(first_a, first_b),
                shape_text(tuple(first_a.shape), tuple(first_b.shape)),
            )
        slots, tols = [], []
        for a, b in zip(ref, new, strict=False):
            if a.shape != b.shape:
                if not _squeezable(a, b):
                    continue
                a, b = a.squeeze(), b.squeeze()
            slots.append(self._slot(a, b))
            tols.append(self.tol.for_dtypes(a.dtype, b.dtype, grad))
        return Pending(slots, tols, _dtype_text(first_a, first_b), "")

    def read(self) -> list[list[float]]:
        if not self.pending:
            return []
        with torch.no_grad():
            values: list[list[float]] = torch.stack(self.pending).cpu().tolist()
            for i, (gap, scale) in enumerate(values):
                if not (math.isfinite(gap) and math.isfinite(scale)):
                    values[i] = _careful(*self.tensors[i])
        return values


@dataclass
class Pending:
    slots: list[int]
    tols: list[Tolerance]
    dtype: str
    shape: str

    def delta(self, values: list[list[float]]) -> Delta:
        """The worst pair (the one furthest beyond, or nearest to, its tolerance)."""
        if self.shape:
            return Delta(float("inf"), 0.0, True, self.tols[0], self.dtype, self.shape)
        worst: Delta | None = None
        for slot, tol in zip(self.slots, self.tols, strict=True):
            gap, scale = values[slot]
            d = Delta(gap, scale, not tol.allows(gap, scale), tol, self.dtype)
            if worst is None or _badness(d) > _badness(worst):
                worst = d
        if worst is None:  # every pair skipped for its shape
            return Delta(0.0, 0.0, False, self.tols[0] if self.tols else Tolerance(0, 0), "")
        return worst


def _badness(d: Delta) -> float:
    bound = d.tolerance.atol + d.tolerance.rtol * d.scale
    if d.max_abs == 0:
        return -1.0
    return d.max_abs / bound if bound > 0 else float("inf")


def origin(
    rows_differ: Sequence[bool], inputs_agree: Sequence[bool]
) -> tuple[int | None, int | None]:
    """(origin, first differing) indices: the first call whose output differs while its inputs
    agree, and the first whose output differs at all."""
    first = next((i for i, d in enumerate(rows_differ) if d), None)
    start = next(
        (i for i, (d, ok) in enumerate(zip(rows_differ, inputs_agree, strict=True)) if d and ok),
        first,
    )
    return start, first
