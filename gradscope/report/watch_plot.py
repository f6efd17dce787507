"""`gradscope watch --plot FILE.png|svg`: layers × steps heatmap over loss and norm curves.

matplotlib (Agg) is imported here only, when a plot is asked for.
"""

from __future__ import annotations

import io
import math

from gradscope.errors import GradscopeError
from gradscope.watcher.groups import binned_max, bins, group_norm, layer_groups
from gradscope.watcher.marks import marks
from gradscope.watcher.report import WatchReport

MARKER = {
    "x": ("X", "red"),
    "^": ("^", "magenta"),
    "v": ("v", "purple"),
    "|": ("|", "orange"),
    "s": ("s", "black"),
}


def render(report: WatchReport, fmt: str = "png", columns: int = 400) -> bytes:
    """The picture's bytes (png or svg); the caller writes them where the user said."""
    if not report.run.steps:
        raise GradscopeError("--plot: no optimizer step was recorded, nothing to plot")
    try:
        import matplotlib
    except ImportError:
        raise GradscopeError("--plot needs matplotlib: pip install matplotlib") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = _figure(plt, report, columns)
    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue()


def _figure(plt, report: WatchReport, columns: int):
    steps = report.run.steps
    numbers = [r.step for r in steps]
    groups = layer_groups(report.run.names(), 24)
    cuts = bins(len(steps), columns)
    grid = []
    for members in groups.values():
        row = binned_max([group_norm(r, members) for r in steps], columns)
        grid.append([math.log10(v) if v and math.isfinite(v) and v > 0 else math.nan for v in row])
    height = 2.2 + 0.28 * len(groups)
    fig, (ax_map, ax_loss, ax_norm) = plt.subplots(
        3,
        1,
        figsize=(11, height + 3.6),
        sharex=True,
        gridspec_kw={"height_ratios": [height, 1.8, 1.8]},
    )
    lo, hi = numbers[cuts[0][0]] - 0.5, numbers[cuts[-1][-1]] + 0.5
    image = ax_map.imshow(
        grid,
        aspect="auto",
        interpolation="nearest",
        cmap="viridis",
        extent=(lo, hi, len(groups) - 0.5, -0.5),
    )
    ax_map.set_yticks(range(len(groups)), list(groups))
    ax_map.set_title(
        f"gradscope watch · {report.run.label}: log10 gradient norm per layer (max per column)",
        loc="left",
        fontsize=10,
    )
    # an inset colour bar takes no width, so the three panels share one step axis
    fig.colorbar(image, cax=ax_map.inset_axes((1.005, 0.0, 0.012, 1.0)), label="log10 ‖grad‖")
    ax_loss.plot(
        numbers,
        [r.loss if r.loss is not None else math.nan for r in steps],
        lw=0.8,
        color="tab:blue",
    )
    ax_loss.set_ylabel("loss")
    if all(r.loss > 0 for r in steps if r.loss is not None and math.isfinite(r.loss)):
        ax_loss.set_yscale("log")
    ax_norm.plot(
        numbers, [r.grad_norm for r in steps], lw=0.8, color="tab:green", label="total grad norm"
    )
    max_norm = next((r.max_norm for r in steps if r.max_norm is not None), None)
    if max_norm is not None:
        ax_norm.axhline(max_norm, color="orange", lw=0.8, ls="--", label="max_norm")
    if all(r.grad_norm > 0 for r in steps if math.isfinite(r.grad_norm)):
        ax_norm.set_yscale("log")
    ax_norm.set_ylabel("grad norm")
    ax_norm.set_xlabel("optimizer step")
    by_step = {r.step: r for r in steps}
    for m in marks(report):
        marker, color = MARKER.get(m.symbol, ("o", "red"))
        ys = [
            by_step[s].grad_norm if math.isfinite(by_step[s].grad_norm) else math.nan
            for s in m.steps
        ]
        ax_norm.scatter(m.steps, ys, marker=marker, color=color, s=28, zorder=3, label=m.label)
        if m.symbol in ("x", "^", "v"):  # above the map, so the cells stay visible
            ax_map.scatter(
                m.steps,
                [-0.5] * len(m.steps),
                marker="v",
                color=color,
                s=40,
                clip_on=False,
                zorder=4,
            )
    ax_norm.legend(loc="upper right", fontsize=7, ncol=3)
    fig.tight_layout()
    return fig
