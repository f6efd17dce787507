"""What the training's process computes once for every sink: the series, the heatmap."""

from __future__ import annotations

import pytest
from sink_runs import close, train

import gradscope
from gradscope.sinks import series
from gradscope.sinks.attached import Sinks
from gradscope.sinks.tensorboard_sink import TensorboardSink

pytest.importorskip("tensorboard")


@pytest.mark.parametrize("how_many", [1, 3])
def test_the_series_are_computed_once_a_step_whatever_the_sinks(tmp_path, monkeypatch, how_many):
    """One computation of a step's series, and one heatmap, sent to every sink, and each
    sink gets the same numbers (none alters them)."""
    from test_tensorboard_sink import _events

    from gradscope.sinks import attached

    calls = []
    scalars = series.Series._scalars
    monkeypatch.setattr(
        series.Series, "_scalars", lambda self, r: calls.append(r.step) or scalars(self, r)
    )
    drawn = []
    heatmap = attached.heatmap
    monkeypatch.setattr(attached, "heatmap", lambda report: drawn.append(1) or heatmap(report))
    folders = [tmp_path / f"tb{i}" for i in range(how_many)]
    sinks = Sinks([TensorboardSink(str(f)) for f in folders])
    with sinks, gradscope.watch(flush_every=7) as w:
        train(25)
    assert sinks.finished(w.report) == []
    assert sorted(calls) == list(range(1, 26)) and len(drawn) == 1
    for folder in folders:
        got = {e.step: e.value for e in _events(folder).Scalars("loss")}
        assert sorted(got) == list(range(1, 26))
        assert all(close(got[r.step], r.loss) for r in w.report.run.steps)


@pytest.mark.parametrize("at", [1, 12])
def test_a_series_that_cannot_be_computed_stops_every_sink_with_a_line(tmp_path, monkeypatch, at):
    """The series fail once, in the writer thread: every sink says so in the report's
    `unwritten` (none silently short), the writer goes on draining, the run completes."""
    scalars = series.Series._scalars

    def broken(self, r):
        if r.step == at:
            raise ValueError("a record the series cannot read")
        return scalars(self, r)

    monkeypatch.setattr(series.Series, "_scalars", broken)
    folders = [str(tmp_path / "a"), str(tmp_path / "b")]
    sinks = Sinks([TensorboardSink(f) for f in folders])
    with sinks, gradscope.watch(flush_every=5) as w:
        train(25)
    lines = sinks.finished(w.report)
    assert w.report.run.status == "completed" and len(w.report.run.steps) == 25
    assert len(lines) == 2
    for folder, line, sink in zip(folders, lines, sinks.sinks, strict=True):
        assert line.startswith(f"--tensorboard {folder}: writing failed at step ")
        assert "(ValueError: a record the series cannot read)" in line
        assert sink.written < at
