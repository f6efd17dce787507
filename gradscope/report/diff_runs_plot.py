"""The diff of two runs over steps: above, the relative difference of the loss and of the
total gradient norm; below, per parameter (rows, in the log's order) the relative
difference of its gradient norm (log colour scale), the first divergence marked and the
tolerance drawn. matplotlib (Agg) is imported here only, when asked for.
"""

from __future__ import annotations

import io
import itertools
import math
from typing import Any

from gradscope.diff.runs.result import RunsDiff

# matplotlib and numpy are imported in functions: `gradscope --help` must not load them

FLOOR = 1e-12
"""Where an exactly equal value is drawn (a log scale has no zero)."""
MOST_COLUMNS = 1200
"""More compared steps than this are drawn as this many columns, each the largest."""
MOST_LABELS = 40
"""Up to this many parameters, each is named on the y axis."""


def _clean(values: list[float]) -> list[float]:
    """NaN (not compared) stays NaN; 0 → FLOOR; inf (one side only) → the largest drawn."""
    return [v if math.isnan(v) else min(max(v, FLOOR), 1e3) for v in values]


def _columns(rows: list[list[float]], n: int) -> list[list[float]]:
    """Each row cut into at most MOST_COLUMNS bins, each bin's largest (NaN if all NaN)."""
    if n <= MOST_COLUMNS:
        return rows
    edges = [round(k * n / MOST_COLUMNS) for k in range(MOST_COLUMNS + 1)]
    out = []
    for row in rows:
        binned = []
        for a, b in itertools.pairwise(edges):
            seen = [v for v in row[a:b] if not math.isnan(v)]
            binned.append(max(seen) if seen else math.nan)
        out.append(binned)
    return out


def plot(result: RunsDiff, fmt: str = "png") -> bytes:
    import matplotlib

    matplotlib.use("Agg", force=True)
    from matplotlib import pyplot as plt

    names = list(result.series.params)
    height = 2.2 + max(len(names), 4) * 0.18 if len(names) <= MOST_LABELS else 5.0
    fig, grid = plt.subplots(
        2,
        2,
        figsize=(10, 2.4 + height),
        height_ratios=[2.4, height],
        width_ratios=[40, 1],
        squeeze=False,
    )
    (top, spare), (heat, scale) = grid
    spare.axis("off")
    heat.sharex(top)
    _draw_totals(top, result)
    _draw_params(fig, heat, scale, result)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt, dpi=110)
    plt.close(fig)
    return buffer.getvalue()


def _draw_totals(top: Any, result: RunsDiff) -> None:
    """The loss's and the total gradient norm's relative difference, the tolerance and the
    first divergence."""
    s = result.series
    steps = s.steps
    for label, values, colour in (
        ("loss", s.loss, "#1f77b4"),
        ("total gradient norm", s.grad_norm, "#ff7f0e"),
    ):
        top.plot(steps, _clean(values), color=colour, linewidth=1.1, label=label)
    top.set_yscale("log")
    tol = result.tolerance
    if not tol.exact:
        top.axhline(tol.rtol, color="#7f7f7f", linestyle="--", linewidth=0.9, label="rtol")
    top.set_ylabel("relative difference")
    top.set_xlabel("")
    top.set_xlim(steps[0] - 0.5 if steps else 0, steps[-1] + 0.5 if steps else 1)
    top.set_title(f"{result.ref_label} vs {result.new_label}: {result.verdict()}", fontsize=10)
    first = result.first
    if first is not None:
        top.axvline(first.step, color="#d62728", linestyle=":", linewidth=1.2)
        top.annotate(
            f"first divergence: step {first.step}",
            (first.step, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(4, -12),
            textcoords="offset points",
            color="#d62728",
            fontsize=8,
            bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "none", "pad": 1},
        )
    top.legend(fontsize=8, loc="lower right")


def _draw_params(fig: Any, heat: Any, scale: Any, result: RunsDiff) -> None:
    """Per parameter, the relative difference of its gradient norm as a heat map, the
    parameters that parted at the first divergence named in red."""
    import numpy as np
    from matplotlib import colors

    s = result.series
    steps = s.steps
    names = list(s.params)
    n = len(steps)
    first = result.first
    rows = _columns([_clean(s.params[name]) for name in names], n)
    matrix = np.array(rows, dtype=float) if rows and rows[0] else np.full((1, 1), np.nan)
    shown = np.ma.masked_invalid(matrix)
    ends = (steps[0] - 0.5, steps[-1] + 0.5) if steps else (0.0, 1.0)
    image = heat.imshow(
        shown,
        aspect="auto",
        interpolation="nearest",
        cmap="magma",
        norm=colors.LogNorm(vmin=FLOOR, vmax=max(1.0, float(np.nanmax(matrix) or 1.0))),
        extent=(ends[0], ends[1], len(names) - 0.5, -0.5),
    )
    fig.colorbar(image, cax=scale, label="relative difference\n(equal: drawn at 1e-12)")
    if len(names) <= MOST_LABELS:
        heat.set_yticks(range(len(names)), names, fontsize=7)
        parted = {p.ref for p in result.parting if first is not None and p.step == first.step}
        for tick, name in zip(heat.get_yticklabels(), names, strict=True):
            if name in parted:
                tick.set_color("#d62728")
    else:
        heat.set_ylabel(f"{len(names)} parameters (log order)")
    if first is not None:
        heat.axvline(first.step, color="#17becf", linestyle="--", linewidth=1.2)
    heat.set_xlabel("step" + (f" (max per column of {n} steps)" if n > MOST_COLUMNS else ""))
