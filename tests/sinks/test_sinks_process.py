"""The sinks' own process: it imports no torch, its libraries' prints never reach the
training's stdout, Ctrl-C is the training's, and a process that dies is a line each
sink, never the run's end."""

from __future__ import annotations

import os
import signal

import pytest
from sink_runs import in_the_sinks_process, train

import gradscope

pytest.importorskip("tensorboard")


def _events_steps(folder) -> list[int]:
    from test_tensorboard_sink import _events

    return sorted(e.step for e in _events(folder).Scalars("loss"))


def test_the_process_imports_no_torch_and_prints_only_to_stderr(tmp_path, monkeypatch, capfd):
    modules = tmp_path / "modules"
    in_the_sinks_process(
        monkeypatch,
        tmp_path / "site",
        f"""
        import atexit, sys

        def said():
            print("a library's chatter")
            with open({str(modules)!r}, "w") as out:
                out.write(" ".join(sorted(sys.modules)))

        atexit.register(said)
        """,
    )
    with gradscope.watch(tensorboard=str(tmp_path / "tb"), flush_every=5) as w:
        train(12)
    assert not w.report.run.unwritten and _events_steps(tmp_path / "tb") == list(range(1, 13))
    loaded = modules.read_text().split()
    assert "tensorboard" in loaded and not [m for m in loaded if m.split(".")[0] == "torch"]
    out, err = capfd.readouterr()
    assert "chatter" not in out and "a library's chatter" in err


def _signalled(folder, sent: signal.Signals, monkeypatch):
    """20 steps, the sinks' process sent `sent` after the sixth (read back at the fifth:
    the recorder's least interval between read-backs set to 0)."""
    import torch
    from torch import nn

    monkeypatch.setattr("gradscope.watcher.recorder.MIN_FLUSH_INTERVAL_S", 0.0)
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gradscope.watch(tensorboard=str(folder), flush_every=5) as w:
        for step in range(1, 21):
            opt.zero_grad()
            model(torch.randn(8, 4)).pow(2).mean().backward()
            opt.step()
            if step == 6:
                w.sinks.drained()
                os.kill(w.sinks._process.process.pid, sent)
    assert w.report.run.status == "completed" and len(w.report.run.steps) == 20
    return w.report


def test_ctrl_c_is_the_trainings_the_process_writes_every_step(tmp_path, monkeypatch):
    report = _signalled(tmp_path / "tb", signal.SIGINT, monkeypatch)  # a terminal's Ctrl-C
    assert not report.run.unwritten and _events_steps(tmp_path / "tb") == list(range(1, 21))


def test_a_process_killed_mid_run_is_a_line_and_the_run_goes_on(tmp_path, monkeypatch):
    folder = tmp_path / "tb"
    report = _signalled(folder, signal.SIGKILL, monkeypatch)
    (line,) = report.run.unwritten
    assert line.startswith(f"--tensorboard {folder}: the sinks' process ended (exit code -9)")
    assert line in report.run.notes


def test_a_sink_that_hangs_is_left_behind_at_the_runs_end(tmp_path, monkeypatch):
    """The end waits DRAIN_S for what is queued, then stops the process: a line, not a
    run that never ends."""
    from gradscope.sinks import attached

    in_the_sinks_process(
        monkeypatch,
        tmp_path / "site",
        """
        import time
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        EventFileWriter.add_event = lambda self, event: time.sleep(60)
        """,
    )
    monkeypatch.setattr(attached, "DRAIN_S", 1.0)
    folder = tmp_path / "tb"
    with gradscope.watch(tensorboard=str(folder), flush_every=5) as w:
        train(10)
    (line,) = w.report.run.unwritten
    assert line == f"--tensorboard {folder}: still writing after 1 s, left behind"
