"""One number per step, stored as runs of equal values while runs are long. No torch.

Most of a step's numbers repeat from one step to the next (its optimizer, backward
calls, learning rates between changes, the clip's max_norm, the loss scale, and the
optional fields a run never sets): a run of equal values costs one value and where it
starts, whatever its length. A column whose values change at most steps (the loss, the
gradient norm, the time) turns into a plain array, one value per step: so a step costs
the few numbers that changed in it, and never more than one value per column.

Equal means the same float: NaN equals NaN (a missing value), 0.0 differs from -0.0.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_right
from typing import Any, Generic, TypeVar

DENSE_AFTER = 256
"""A column of runs is judged only after this many values (a run's first steps, such as
the update measured at each of the first 100, are not its habit)."""


T = TypeVar("T", int, float)


class StepColumn(Generic[T]):
    """Values by step index; `typecode` as `array`'s ('d' floats, 'q' or 'i' integers)."""

    __slots__ = ("_dense", "_hint", "_n", "_starts", "_typecode", "_values")

    def __init__(self, typecode: str = "d") -> None:
        self._typecode = typecode
        self._values: array[Any] = array(typecode)
        """The value of each run (runs), or of each step (dense)."""
        self._starts = array("q")
        """Where each run starts; empty once dense."""
        self._dense = False
        self._n = 0
        self._hint = 0
        """The run the latest read fell in: reads in order cost no search."""

    def __len__(self) -> int:
        return self._n

    def extend(self, values: list[T]) -> None:
        if self._dense:
            self._values.extend(values)
            self._n = len(self._values)
            return
        runs, starts, n = self._values, self._starts, self._n
        first = values[0] if values else None
        zero = first == 0 and self._typecode == "d"  # count() would take -0.0 for 0.0
        if runs and first is not None and not zero and _same(first, runs[-1]):
            if values.count(first) == len(values):  # the run goes on (counted in C)
                self._n = n + len(values)
                return
        last = runs[-1] if runs else None
        for v in values:
            if last is None or not _same(v, last):
                runs.append(v)
                starts.append(n)
                last = runs[-1]
            n += 1
        self._n = n
        if n >= DENSE_AFTER and 2 * len(runs) > n:  # runs cost more than one value a step
            self._densify()

    def append(self, value: T) -> None:
        self.extend([value])

    def _densify(self) -> None:
        self._values = array(self._typecode, self.values())
        self._starts = array("q")
        self._dense = True

    def __getitem__(self, i: int) -> T:
        if self._dense:
            return self._values[i]
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError("column index out of range")
        starts, k = self._starts, self._hint
        if not (starts[k] <= i and (k + 1 == len(starts) or i < starts[k + 1])):
            k = self._hint = bisect_right(starts, i) - 1
        return self._values[k]

    def values(self) -> list[T]:
        """Every step's value, in order."""
        if self._dense:
            return self._values.tolist()
        out: list[T] = []
        if not self._n:
            return out
        ends = [*self._starts[1:], self._n]
        for v, start, end in zip(self._values, self._starts, ends, strict=True):
            out += [v] * (end - start)
        return out

    def nbytes(self) -> int:
        """Bytes its arrays hold (their allocated size)."""
        return self._values.__sizeof__() + self._starts.__sizeof__()


def _same(a: Any, b: Any) -> bool:
    if a == b:
        return a != 0 or math.copysign(1.0, a) == math.copysign(1.0, b)
    return a != a and b != b  # both NaN
