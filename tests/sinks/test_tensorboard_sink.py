"""--tensorboard as a sink: the events are on disk as the run goes (each read-back), about
ten series, one heatmap image for the layers, a sink that fails is a line."""

from __future__ import annotations

import pytest
from sink_runs import close, in_the_sinks_process, report_series, train

import gradscope
from gradscope.sinks.series import SERIES

pytest.importorskip("tensorboard")


def _events(directory):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(directory), size_guidance={"scalars": 0, "images": 0})
    events.Reload()
    return events


def test_the_events_are_written_as_the_run_goes(tmp_path):
    folder = tmp_path / "tb"
    with gradscope.watch(tensorboard=str(folder), flush_every=10) as w:
        train(25)
        w.sinks.drained()  # the writer thread: its queue written (the run may go on)
        during = {e.step for e in _events(folder).Scalars("loss")}
        (sink,) = w.sinks.sinks
        handed = sink.written  # the steps read back so far (the recorder's batches)
    assert 10 <= handed <= 25 and during == set(range(1, handed + 1))
    events = _events(folder)
    tags = events.Tags()["scalars"]
    assert set(tags) <= set(SERIES) and len(SERIES) <= 12
    for tag in ("loss", "grad_norm/total", "lr"):
        got = {e.step: e.value for e in events.Scalars(tag)}
        want = report_series(w.report, tag)
        assert sorted(got) == list(range(1, 26))
        assert all(close(got[s], want[s]) for s in want), tag
    assert events.Tags()["images"] == ["grad_norm/layers"]


def test_the_clip_fraction_and_skips_count_across_read_backs(tmp_path):
    from sink_runs import watched

    report = watched(30, tensorboard=str(tmp_path / "tb"), flush_every=7)
    events = _events(tmp_path / "tb")
    fraction = {e.step: e.value for e in events.Scalars("clip_fraction")}
    clipped = 0
    for i, r in enumerate(report.run.steps, 1):
        clipped += r.clipped
        assert close(fraction[r.step], clipped / i)
    assert {e.value for e in events.Scalars("skipped_steps")} == {0.0}


def test_a_disk_full_mid_run_is_a_line_and_the_run_goes_on(tmp_path, monkeypatch):
    """The event writer fails from step 9 on, in the sinks' process: the batch of steps
    6-10 is where it stops, the line says so, the training never sees it."""
    in_the_sinks_process(
        monkeypatch,
        tmp_path / "site",
        """
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        real = EventFileWriter.add_event

        def full(self, event):
            if event.step >= 9:
                raise OSError(28, "No space left on device")
            return real(self, event)

        EventFileWriter.add_event = full
        """,
    )
    with gradscope.watch(tensorboard=str(tmp_path / "tb"), flush_every=5) as w:
        train(20)
    assert w.report.run.status == "completed" and len(w.report.run.steps) == 20
    (line,) = w.report.run.unwritten
    assert line == (
        f"--tensorboard {tmp_path / 'tb'}: writing failed at step 6 (OSError: [Errno 28] No "
        "space left on device); it stops after 5 steps, the report covers them all"
    )
    assert sorted(e.step for e in _events(tmp_path / "tb").Scalars("loss")) == list(range(1, 9))
