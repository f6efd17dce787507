"""When two logged numbers (a loss, a gradient norm) count as the same, per dtype.

|a - b| <= atol + rtol * |a|, a the reference's value; bitwise under --exact. The
per-dtype rtol is `gradscope diff`'s gradient tolerance (gradscope/diff/compare.py:
DEFAULTS times GRAD_FACTOR): a norm or a loss is a reduction over the whole batch, so
two healthy runs that differ only in the order of a reduction (a non-deterministic
kernel, another thread count) stay well inside it for their first steps. A log that
does not record the dtype is judged at float32's, and the report says it was assumed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

RTOL = {"float64": 1e-6, "float32": 1e-4, "float16": 2e-2, "bfloat16": 1.6e-1}
"""Relative tolerance by dtype (the looser of the two runs' dtypes is used)."""
ATOL = 1e-12
"""Absolute floor: two exact zeros (a frozen layer) agree, tiny norms are judged relatively."""
ASSUMED = "float32"


@dataclass(frozen=True)
class RunTolerance:
    rtol: float
    atol: float
    exact: bool = False
    source: str = ""
    """How the numbers were chosen, for the report: "float32 (assumed: ...)", "--rtol"."""

    def ratio(self, a: float | None, b: float | None) -> float:
        """|a-b| over what the tolerance allows: <= 1 agrees; inf for a one-sided value."""
        if a is None or b is None:
            return 0.0 if a is b else math.inf
        if a == b or (math.isnan(a) and math.isnan(b)):
            return 0.0
        gap = abs(a - b)
        if math.isnan(gap) or math.isinf(gap):
            return math.inf
        if self.exact:
            return math.inf
        bound = self.atol + self.rtol * abs(a)
        return gap / bound if bound > 0 else math.inf


def relative(a: float | None, b: float | None) -> float:
    """|a-b| / |a| (inf where only one side is finite or present; 0 when equal)."""
    if a is None or b is None:
        return 0.0 if a is b else math.inf
    if a == b or (math.isnan(a) and math.isnan(b)):
        return 0.0
    gap = abs(a - b)
    if not math.isfinite(gap):
        return math.inf
    return gap / abs(a) if a != 0 else math.inf


def choose(
    ref_dtype: str | None,
    new_dtype: str | None,
    given: str | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    exact: bool = False,
) -> RunTolerance:
    """The tolerance and the sentence that states it. `given`: --dtype."""
    if exact:
        return RunTolerance(0.0, 0.0, True, "bitwise (--exact)")
    dtypes = [d for d in (given,) if d] or [d for d in (ref_dtype, new_dtype) if d]
    known = [d for d in dtypes if d in RTOL]
    if known:
        dtype = max(known, key=lambda d: RTOL[d])
        why = "--dtype" if given else "recorded in the log"
    else:
        dtype = ASSUMED
        why = "assumed: the logs do not record a dtype; --dtype sets it"
    if rtol is not None or atol is not None:
        source = "--rtol/--atol"
    else:
        source = f"{dtype} ({why})"
    return RunTolerance(
        RTOL[dtype] if rtol is None else rtol, ATOL if atol is None else atol, False, source
    )
