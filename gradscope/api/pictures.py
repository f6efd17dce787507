"""The pictures a result can also be drawn as: a plot (.png, .svg or .pdf). Where they go
is checked before any work starts (a script that changes directory moves nothing); they
are drawn from the finished result."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gradscope.diff.runs.result import RunsDiff
from gradscope.errors import GradscopeError
from gradscope.report.diff_plot import plot as models_plot
from gradscope.report.diff_runs_plot import plot as runs_plot
from gradscope.report.flow_plot import plot as flow_plot
from gradscope.report.write import destination, write_file

PLOT_FORMATS = ("png", "svg", "pdf")


@dataclass(frozen=True)
class Plot:
    """A checked --plot FILE: its absolute path and the format its extension names."""

    path: str
    fmt: str

    @classmethod
    def of(cls, path: str | None) -> Plot | None:
        if path is None:
            return None
        fmt = path.rpartition(".")[2].lower()
        if fmt not in PLOT_FORMATS:
            raise GradscopeError(f"--plot {path}: give a .png, .svg or .pdf file")
        full = destination(path, "--plot")
        assert full is not None
        return cls(full, fmt)

    def draw(self, render: Callable[[Any, str], bytes], result: Any) -> None:
        write_file(self.path, render(result, self.fmt))


def inspect_plot(plot: Plot, report: Any) -> None:
    """The gradient flow of one inspected pass (report/flow_plot.py)."""

    plot.draw(flow_plot, report)


def diff_plot(plot: Plot, result: Any) -> None:
    """Two models' per-module difference, or two runs' divergence, whichever `result` is."""

    if isinstance(result, RunsDiff):
        plot.draw(runs_plot, result)
    else:
        plot.draw(models_plot, result)


@dataclass(frozen=True)
class WatchPictures:
    """What a watched run is also drawn as, checked before it runs (its TensorBoard
    events are a sink: gradscope/sinks/)."""

    plot: Plot | None = None

    @classmethod
    def of(cls, plot: str | None) -> WatchPictures:
        return cls(Plot.of(plot))

    def paths(self) -> dict[str, str | None]:
        """The files they write, keyed by option, for `write.distinct`."""
        return {"--plot": self.plot.path if self.plot else None}

    def draw(self, report: Any) -> list[str]:
        """Draw a run with judged steps; what could not be written, as one line each (the
        report is never lost to a picture)."""
        if not report.judged or self.plot is None:
            return []
        try:
            from gradscope.report import watch_plot

            self.plot.draw(watch_plot.render, report)
        except (GradscopeError, OSError) as exc:
            return [f"--plot {self.plot.path}: {exc}"]
        return []
