"""Updates that round away in a low-precision weight (GS410's cause where it holds): a
bfloat16 or float16 weight keeps no value between its neighbours, and an Adam-family step
of about lr per element below the spacing of values near the weight rounds back to the same
weight. A LayerNorm's weight of 1.0 in bfloat16 (neighbours 0.0039 below and 0.0078 above)
under AdamW at lr 3e-3 never moves. No torch.
"""

from __future__ import annotations

import math

from gradscope.fmt import num
from gradscope.steps.records import WatchRun

SPACING = {"bfloat16": 2.0**-7, "float16": 2.0**-10}
"""The gap between 1.0 and the next value up (torch.finfo(dtype).eps): near a weight w the
representable values are about |w| times this apart."""


def rounded_away(run: WatchRun, i: int) -> tuple[str, str] | None:
    """Why parameter `i` did not move, where its dtype says: the step its optimizer takes
    per element (about lr, for torch's Adam family and sign updates) is below the spacing
    of the values near its weights (its rms before the first update); None otherwise (a
    float32 weight, an SGD whose step scales with the gradient, a size not measured); with
    the advice that fixes it."""
    p = run.params[i]
    spacing = SPACING.get(p.dtype)
    if spacing is None or not p.lr or p.weight_norm is None or not p.shape:
        return None
    if not _adaptive(run, i):
        return None
    rms = p.weight_norm / math.sqrt(math.prod(p.shape))
    gap = rms * spacing
    if not p.lr < gap:
        return None
    why = (
        f"it is {p.dtype}, where values near its weights (rms {num(rms)}) are {num(gap)} "
        f"apart, and its optimizer's step of about lr = {num(p.lr)} per element is smaller: "
        "every update rounds back to the same weight"
    )
    advice = (
        f"keep the weights in float32 and run the forward under torch.autocast(dtype="
        f"torch.{p.dtype}) (float32 master weights), or an optimizer that keeps the "
        "rounding error (Kahan summation, stochastic rounding); a larger lr only moves the "
        "weights in coarse jumps"
    )
    return why, advice


def _adaptive(run: WatchRun, i: int) -> bool:
    """The optimizer holding it steps about lr per element: torch's Adam family, Lion."""
    for index in range(len(run.optimizers)):
        if i in run.members_of(index):
            settings = run.settings_of(index)
            return settings is not None and settings.adaptive
    return False
