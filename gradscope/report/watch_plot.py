"""`gradscope watch --plot FILE.png|svg`: layers × steps heatmap over loss and norm curves.

matplotlib (Agg) is imported here only, when a plot is asked for.
"""

from __future__ import annotations

import io
import math

from gradscope.errors import GradscopeError
from gradscope.report.watch_groups import binned_max, bins, group_norm, layer_groups
from gradscope.report.watch_marks import marks
from gradscope.steps import noise
from gradscope.steps.noise import NoiseSummary
from gradscope.steps.records import StepRecord
from gradscope.steps.step_record import steps_by_optimizer
from gradscope.watcher.report import WatchReport

# matplotlib is imported in functions: `gradscope --help` must not load it

MARKER = {
    "x": ("X", "red"),
    "^": ("^", "magenta"),
    "v": ("v", "purple"),
    "|": ("|", "orange"),
    "s": ("s", "black"),
    "o": ("o", "brown"),
}


def render(report: WatchReport, fmt: str = "png", columns: int = 400) -> bytes:
    """The picture's bytes (png, svg or pdf); the caller writes them where the user said."""
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


def heatmap(report: WatchReport, columns: int = 400) -> bytes | None:
    """The layers × steps heatmap alone, as a PNG: the one picture a sink gets (wandb,
    MLflow, TensorBoard), in place of a panel per parameter; None with no step to draw."""
    steps = report.run.steps
    if not steps or not any(r.detail and r.param_norms for r in steps):
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = layer_groups(report.run.names(), 24)
    fig, ax = plt.subplots(figsize=(11, 1.6 + 0.28 * len(groups)))
    _draw_map(fig, ax, report, groups, columns)
    ax.set_xlabel("optimizer step")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue()


def _figure(plt, report: WatchReport, columns: int):
    groups = layer_groups(report.run.names(), 24)
    height = 2.2 + 0.28 * len(groups)
    measured = [s for s in report.noise if s.steps]
    panels = [height, 1.8, 1.8] + ([1.8] * bool(measured))
    fig, axes = plt.subplots(
        len(panels),
        1,
        figsize=(11, sum(panels)),
        sharex=True,
        gridspec_kw={"height_ratios": panels},
    )
    ax_map, ax_loss, ax_norm = axes[:3]
    _draw_map(fig, ax_map, report, groups, columns)
    _draw_losses(ax_loss, report)
    _draw_norms(ax_norm, report)
    if measured:
        _noise_panel(axes[3], report, measured)
    axes[-1].set_xlabel("optimizer step")
    _draw_marks(ax_map, ax_norm, report)
    ax_norm.legend(loc="upper right", fontsize=7, ncol=3)
    fig.tight_layout()
    return fig


def _layer_grid(
    report: WatchReport, groups: dict[str, list[int]], columns: int
) -> list[list[float]]:
    """log10 of each layer group's gradient norm, binned to `columns` (max per column)."""
    steps = report.run.steps
    owners = _owners(report)
    grid = []
    for members in groups.values():
        # a layer's norm at the steps of the optimizers that update it (a GAN's D at D's)
        # (held between them, so the row stays continuous)
        mine = {o for i in members for o in owners.get(i, ())}
        held: list[float | None] = []
        for r in steps:
            stepped = not mine or r.optimizer in mine
            held.append(group_norm(r, members) if stepped else (held[-1] if held else None))
        row = binned_max(held, columns)
        grid.append([math.log10(v) if v and math.isfinite(v) and v > 0 else math.nan for v in row])
    return grid


def _draw_map(fig, ax_map, report: WatchReport, groups: dict[str, list[int]], columns: int) -> None:
    """The layers × steps heatmap and its colour bar."""
    numbers = [r.step for r in report.run.steps]
    cuts = bins(len(numbers), columns)
    lo, hi = numbers[cuts[0][0]] - 0.5, numbers[cuts[-1][-1]] + 0.5
    image = ax_map.imshow(
        _layer_grid(report, groups, columns),
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


def _draw_losses(ax_loss, report: WatchReport) -> None:
    """Each optimizer's loss over its steps."""
    steps = report.run.steps
    several = len(report.run.optimizers) > 1
    for i, own, color in _series(report):
        label = report.optimizer_label(i) if several else None
        ax_loss.plot(
            [r.step for r in own],
            [r.loss if r.loss is not None else math.nan for r in own],
            lw=0.8,
            color=color,
            label=label,
        )
    if several:  # the losses of two optimizers are different quantities: say whose is whose
        ax_loss.legend(loc="upper right", fontsize=7)
    ax_loss.set_ylabel("loss")
    if all(r.loss > 0 for r in steps if r.loss is not None and math.isfinite(r.loss)):
        ax_loss.set_yscale("log")


def _draw_norms(ax_norm, report: WatchReport) -> None:
    """Each optimizer's total gradient norm, and the clipping's max_norm."""
    steps = report.run.steps
    several = len(report.run.optimizers) > 1
    for i, own, color in _series(report):
        label = f"{report.optimizer_label(i)}: grad norm" if several else "total grad norm"
        ax_norm.plot(
            [r.step for r in own],
            [r.grad_norm for r in own],
            lw=0.8,
            color="tab:green" if not several else color,
            label=label,
        )
    max_norm = next((r.max_norm for r in steps if r.max_norm is not None), None)
    if max_norm is not None:
        ax_norm.axhline(max_norm, color="orange", lw=0.8, ls="--", label="max_norm")
    if all(r.grad_norm > 0 for r in steps if math.isfinite(r.grad_norm)):
        ax_norm.set_yscale("log")
    ax_norm.set_ylabel("grad norm")


def _draw_marks(ax_map, ax_norm, report: WatchReport) -> None:
    """The findings' steps on the norm curve, the worst also above the map."""
    by_step = {r.step: r for r in report.run.steps}
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


def _noise_panel(ax, report: WatchReport, measured: list[NoiseSummary]) -> None:
    """The smoothed B_simple over the steps, and the batch the run uses."""
    several = len(measured) > 1
    for s in measured:
        points = noise.series(report.run.steps, s.optimizer)
        color = COLORS[s.optimizer % len(COLORS)] if several else "tab:purple"
        whose = f": {report.optimizer_label(s.optimizer)}" if several else ""
        ax.plot(
            [p.step for p in points],
            [p.b_simple if p.b_simple is not None else math.nan for p in points],
            lw=0.9,
            color=color,
            label=f"B_simple (smoothed){whose}",
        )
        if s.batch is not None:
            ax.axhline(
                s.batch, color=color, lw=0.8, ls="--", label=f"this run's batch ({s.batch:g})"
            )
        if s.critical is not None:
            span = f"steps {s.first_step}-{s.last_step}: " + (
                f"≈ {s.critical:.3g}"
                if s.resolved
                else f"not resolved ({s.critical:.3g} ± {s.spread or 0:.3g})"
            )
            ax.axvspan(s.first_step, s.last_step, color=color, alpha=0.06, label=span)
    ax.set_yscale("log")
    ax.set_ylabel(f"critical batch\n({measured[0].unit})", fontsize=8)
    ax.legend(loc="upper left", fontsize=7)


COLORS = ("tab:blue", "tab:red", "tab:purple", "tab:brown", "tab:olive", "tab:cyan")


def _series(report: WatchReport) -> list[tuple[int, list[StepRecord], str]]:
    """(optimizer index, its steps, colour) for each optimizer that stepped."""
    own = steps_by_optimizer(report.run.steps)
    return [(i, own[i], COLORS[i % len(COLORS)]) for i in sorted(own)]


def _owners(report: WatchReport) -> dict[int, set[int]]:
    """Per parameter position, the optimizers that step it (empty: not known)."""
    out: dict[int, set[int]] = {}
    for o, members in enumerate(report.run.members):
        for i in members:
            out.setdefault(i, set()).add(o)
    return out
