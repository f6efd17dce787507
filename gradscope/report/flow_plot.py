"""The gradient-flow picture people draw by hand (the forum's `plot_grad_flow`), from a report.

Per parameter tensor in model order: the gradient norm and the grad/weight ratio on
log scales, each bar coloured by the parameter's status; a None gradient and an
all-zero one cannot sit on a log scale, so they are marked on the axis with their
word. matplotlib (Agg) is imported here only, when a plot is asked for.
"""

from __future__ import annotations

import io
from typing import Any

from gradscope.inspector.results import Report
from gradscope.stats import ParamStats

# matplotlib is imported in functions: `gradscope --help` must not load it

COLOURS = {
    "ok": "#4c9be8",
    "exploding": "#f28e2b",
    "vanishing": "#e6c229",
    "zero": "#b0b0b0",
    "none": "#d62728",
    "non-finite": "#d62728",
    "frozen": "#d9d9d9",
}
MOST_BARS = 120
"""Above this many tensors, bars are per module (norms combined) so labels stay legible."""


def _bars(ax: Any, rows: list[dict[str, Any]], key: str, title: str) -> None:
    """One panel: a bar per parameter on a log scale, coloured by status; a parameter with
    no bar (no gradient, zero, non-finite, frozen) named at the floor."""
    values = [r[key] for r in rows]
    floor = _floor(values)
    ax.set_yscale("log")
    ax.bar(
        list(range(len(rows))),
        [v if v and v > 0 else 0 for v in values],
        color=[COLOURS.get(r["status"], COLOURS["ok"]) for r in rows],
        width=0.8,
    )
    for x, (r, v) in enumerate(zip(rows, values, strict=True)):
        if r["status"] in ("none", "zero", "non-finite", "frozen") or not v:
            ax.annotate(
                r["status"],
                (x, floor),
                rotation=90,
                ha="center",
                va="bottom",
                fontsize=7,
                color=COLOURS.get(r["status"], "black"),
            )
    ax.set_ylim(bottom=floor)
    ax.set_ylabel(title)
    ax.grid(axis="y", which="major", alpha=0.3)


def plot(report: Report, fmt: str = "png") -> bytes:
    """The picture as PNG or SVG bytes."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    from matplotlib import pyplot as plt

    rows = _rows(report)
    width = min(max(6.0, 0.22 * len(rows) + 2.0), 24.0)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(width, 7.0), sharex=True)
    xs = list(range(len(rows)))
    for ax, key, title in (
        (top, "norm", "gradient L2 norm"),
        (bottom, "ratio", "grad norm / weight norm"),
    ):
        _bars(ax, rows, key, title)
    bottom.set_xticks(xs)
    bottom.set_xticklabels([_short(r["name"]) for r in rows], rotation=90, fontsize=7)
    top.set_title(f"gradient flow: {report.target}", fontsize=10, loc="left")
    handles = [
        plt.Rectangle((0, 0), 1, 1, color=c)
        for s, c in COLOURS.items()
        if s in {r["status"] for r in rows}
    ]
    labels = [s for s in COLOURS if s in {r["status"] for r in rows}]
    top.legend(handles, labels, fontsize=7, loc="upper right", ncols=min(len(labels), 4))
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt, dpi=110)
    plt.close(fig)
    return buffer.getvalue()


def _rows(report: Report) -> list[dict]:
    params = list(report.stats.params)
    if len(params) <= MOST_BARS:
        return [_row(p.name, [p], report) for p in params]
    modules: dict[str, list[ParamStats]] = {}
    for p in params:
        modules.setdefault(p.module or p.name, []).append(p)
    return [_row(name, ps, report) for name, ps in modules.items()]


def _row(name: str, params: list[ParamStats], report: Report) -> dict:
    statuses = [report.status(p) for p in params]
    worst = next((s for s in COLOURS if s != "ok" and s in statuses), "ok")
    norms = [p.grad_norm for p in params if p.grad_norm is not None]
    weights = [p.weight_norm for p in params]
    norm = sum(n * n for n in norms) ** 0.5 if norms else None
    weight = sum(w * w for w in weights) ** 0.5
    status = worst if len(params) == 1 or worst != "ok" else "ok"
    return {
        "name": name,
        "status": status,
        "norm": norm,
        "ratio": norm / weight if norm is not None and weight else None,
    }


def _floor(values: list[float | None]) -> float:
    """The bottom of the log axis: a decade under the smallest positive value."""
    positive = [v for v in values if v and v > 0 and v == v and v != float("inf")]
    return min(positive) / 10 if positive else 1e-8


def _short(name: str, width: int = 32) -> str:
    return name if len(name) <= width else name[: width // 2 - 1] + "…" + name[-(width // 2) :]
