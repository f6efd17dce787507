"""The diff along the forward: per module call, the relative difference of its output (log
scale), the first divergence marked. matplotlib (Agg) is imported here only, when asked for.
"""

from __future__ import annotations

import io
import math

from gradscope.diff.result import DiffResult

# matplotlib is imported in functions: `gradscope --help` must not load it

MOST_LABELS = 60
"""Up to this many module calls, each is named on the x axis."""
FLOOR = 1e-12
"""Where an exactly equal output is drawn (a log scale has no zero)."""


def plot(result: DiffResult, fmt: str = "png") -> bytes:
    import matplotlib

    matplotlib.use("Agg", force=True)
    from matplotlib import pyplot as plt

    rows = [(i, r) for i, r in enumerate(result.modules) if r.output is not None]
    deltas = [r.output for _, r in rows if r.output is not None]
    xs = [i for i, _ in rows]
    ys = [_value(d.rel if not d.shape else math.inf) for d in deltas]
    colours = [
        "#d62728" if i == result.origin else "#f28e2b" if r.differs else "#4c9be8" for i, r in rows
    ]
    width = min(max(7.0, 0.12 * len(xs) + 3.0), 24.0)
    fig, ax = plt.subplots(figsize=(width, 5.2 if len(rows) <= MOST_LABELS else 4.2))
    ax.set_yscale("log")
    ax.vlines(xs, FLOOR, ys, colors=colours, linewidth=1.2)
    ax.scatter(xs, ys, c=colours, s=14, zorder=3)
    bounds = [_value(d.tolerance.rtol) for d in deltas]
    ax.step(xs, bounds, where="mid", color="#7f7f7f", linestyle="--", linewidth=0.9, label="rtol")
    if result.origin is not None:
        row = result.modules[result.origin]
        ax.axvline(result.origin, color="#d62728", linestyle=":", linewidth=1.0)
        ax.annotate(
            f"starts here: {row.new or row.ref or '(model)'}",
            (result.origin, _value(row.output.rel if row.output else 1.0)),
            xytext=(-8, -14),
            textcoords="offset points",
            ha="right",
            bbox={"fc": "white", "ec": "none", "alpha": 0.85},
            color="#d62728",
            fontsize=9,
        )
    if len(rows) <= MOST_LABELS:
        ax.set_xticks(xs)
        ax.set_xticklabels([r.label for _, r in rows], rotation=90, fontsize=7)
    ax.set_xlabel("module call, in the order forwards finish")
    ax.set_ylabel("output difference, max|Δ| / max|ref|")
    ax.set_title(f"{result.ref_label}  vs  {result.setting or result.new_label}", fontsize=10)
    ax.set_ylim(FLOOR / 2, max([*ys, 1.0]) * 3)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=110)
    plt.close(fig)
    return buf.getvalue()


def _value(x: float) -> float:
    if math.isinf(x) or math.isnan(x):
        return 10.0
    return max(x, FLOOR)
