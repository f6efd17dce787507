"""A failure of gradscope's own inside a hook never reaches the training: each hook point
made to raise in turn leaves the run's prints and final weights bit-identical to the bare
run, and the report still comes, with an internal-error note naming the step and the part
switched off, exit 3. A failure of the user's own code is still the script's (exit 2)."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
import torch
from torch import nn

import gradscope
from gradscope.errors import ExitCode, user_frame
from gradscope.findings import Severity
from gradscope.outcome import exit_code
from gradscope.watcher import (
    backward_calls,
    clipping,
    nan_probe,
    noise_scale,
    recorder,
    replaced,
    resets,
    schedules,
    stepping,
)
from gradscope.watcher.faults import Fault
from gradscope.watcher.guard import shielded
from gradscope.watcher.patches import grad_scaler
from gradscope.watcher.recorder import Recorder
from gradscope.watcher.state import WatchState
from gradscope.watcher.threads import Threads

STEPS = 6
NAN_STEP = 3
"""A NaN batch here: GradScaler skips the step (the GradScaler.step hook records it)."""


def train(out: list[str]) -> list[torch.Tensor]:
    """Every hook point: both zero_grads, two backward calls a step (Tensor.backward and
    torch.autograd.backward: the noise scale's hooks go on), GradScaler's scale and step
    (one step skipped), get_total_norm, clip_grads_with_norm_, clip_grad_norm_ and an lr
    scheduler's step."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8)
    schedule = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    for step in range(1, STEPS + 1):
        model.zero_grad()
        opt.zero_grad()
        for micro in range(2):
            x = torch.randn(3, 4)
            if step == NAN_STEP and micro:
                x[0, 0] = float("nan")
            loss = model(x).pow(2).mean()
            backward = torch.autograd.backward if micro else torch.Tensor.backward
            backward(scaler.scale(loss))  # one line: the noise scale measures the step
        scaler.unscale_(opt)
        total = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])
        torch.nn.utils.clip_grads_with_norm_(model.parameters(), 10.0, total)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        scaler.step(opt)
        scaler.update()
        schedule.step()
        out.append(f"{step} {loss.item()!r} {scaler.get_scale()!r}")
    return [p.detach().clone() for p in model.parameters()]


def bare() -> tuple[list[str], list[torch.Tensor]]:
    out: list[str] = []
    return out, train(out)


class Boom(Exception):
    """What the injected failure raises."""


def failing_at(original, call: int):
    """`original`, raising Boom at its `call`-th call (earlier calls run as they are)."""
    calls = [0]

    def inner(*args, **kwargs):
        calls[0] += 1
        if calls[0] == call:
            raise Boom("injected")
        return original(*args, **kwargs)

    return inner


# (module or class, attribute, which call raises, the part the note names, whole watch)
HOOK_POINTS = [
    (stepping, "begin", 2, "the optimizer's pre-step hook", True),
    (stepping, "finish", 2, "the optimizer's post-step hook", True),
    (backward_calls, "started", 3, "the backward() hook", True),
    (backward_calls, "ended", 3, "the backward() hook", True),
    (resets, "resetting", 3, "the zero_grad() hook", True),
    (resets, "optimizer_reset", 2, "the zero_grad() hook", True),
    (resets, "module_reset", 2, "the zero_grad() hook", True),
    (clipping, "before_clip", 2, "the clip_grad_norm_() hook", True),
    (clipping, "clipped", 2, "the clip_grad_norm_() hook", True),
    (clipping, "total_norm", 2, "the get_total_norm() hook", True),
    (clipping, "given_norm", 2, "the clip_grads_with_norm_() hook", True),
    (grad_scaler, "_scaled", 3, "the GradScaler.scale() hook", True),
    (grad_scaler, "_skipped", 1, "the GradScaler.step() hook", True),
    (schedules, "stepped", 2, "the lr scheduler hook", True),
    (Recorder, "_flush", 1, "the optimizer's post-step hook", True),
    (noise_scale, "_cpu_norm", 5, "the noise scale's gradient hook", False),
    (noise_scale.MicroGrads, "_batch_size", 2, "the noise scale's forward pre-hook", False),
    (nan_probe, "look", 1, "the NaN probe", False),
    (replaced, "registered", 1, "the module registration hook", True),
]


@pytest.fixture(autouse=True)
def _read_back_every_two_steps(monkeypatch):
    """`flush_every=2` reads back every two steps, however fast they come (the recorder
    waits MIN_FLUSH_INTERVAL_S between read-backs: a quick run's first would come only at
    the watch's end, and an injection into it would be met there, not in the step's hook)."""
    monkeypatch.setattr(recorder, "MIN_FLUSH_INTERVAL_S", 0.0)


@pytest.fixture(scope="module")
def expected() -> tuple[list[str], list[torch.Tensor]]:
    return bare()


def _watched(**options) -> tuple[list[str], list[torch.Tensor], Any]:
    out: list[str] = []
    with gradscope.watch(flush_every=2, **options) as w:
        weights = train(out)
    return out, weights, w.report


def _same_run(got: tuple[list[str], list[torch.Tensor]], expected) -> None:
    out, weights = got
    assert out == expected[0]
    for a, b in zip(weights, expected[1], strict=True):
        assert torch.equal(a, b)


def test_the_watched_run_is_the_bare_run_and_gradscope_is_quiet(expected):
    """The run the injections break: every hook point reached, nothing failed."""
    out, weights, report = _watched()
    _same_run((out, weights), expected)
    assert report.faults == () and report.internal_error() is None
    run = report.run
    assert len(run.steps) == STEPS and sum(r.skipped for r in run.steps) == 1
    assert any(r.micro_batches == 2 for r in run.steps)  # the noise scale's hooks ran
    assert exit_code([report.outcome()], Severity.ERROR) < ExitCode.ERROR


@pytest.mark.parametrize(
    "owner,name,call,part,whole", HOOK_POINTS, ids=[f"{p[0].__name__}.{p[1]}" for p in HOOK_POINTS]
)
def test_a_failing_hook_point_never_reaches_the_training(
    monkeypatch, expected, owner, name, call, part, whole
):
    monkeypatch.setattr(owner, name, failing_at(getattr(owner, name), call))
    out, weights, report = _watched()
    _same_run((out, weights), expected)  # prints and final weights: bit-identical
    run = report.run
    assert run.status == "completed" and report.failure() is None
    (fault,) = report.faults
    assert fault.part == part and fault.whole is whole and not fault.ended
    assert fault.error == "Boom: injected" and "Boom" in fault.trace
    assert 1 <= fault.step <= STEPS
    note = report.internal_error()
    assert note is not None and note in run.notes
    assert f"gradscope failed in {part} at step {fault.step} (Boom: injected)" in note
    if whole:  # the steps before it, and none after
        assert "the watch was switched off there and training went on" in note
        assert len(run.steps) <= fault.step
    else:  # only that part: every step still recorded
        assert f"{part} was switched off there" in note
        assert len(run.steps) == STEPS
    outcome = report.outcome()
    assert exit_code([outcome], Severity.ERROR) == ExitCode.INTERNAL
    assert outcome.could_not_run is not None and "the script raised" not in outcome.could_not_run
    summary = report.summary()
    assert summary["internal_errors"] == [
        {"part": part, "step": fault.step, "error": "Boom: injected", "thread": None}
    ]


def test_a_failing_finaliser_of_the_recorder_never_reaches_the_training(expected):
    """The recorder's finalisers are where the distributed hooks sum shards' norms."""

    def finalise(squares: torch.Tensor) -> torch.Tensor:
        raise Boom("injected")

    out: list[str] = []
    with gradscope.watch(flush_every=2) as w:
        w.recorder.finalisers.append(finalise)
        weights = train(out)
    _same_run((out, weights), expected)
    (fault,) = w.report.faults
    assert fault.part == "the optimizer's post-step hook"
    assert fault.step == 3  # step 2 was numbered, then its read-back failed
    assert w.report.run.steps == []  # neither step could be read back
    assert exit_code([w.report.outcome()], Severity.ERROR) == ExitCode.INTERNAL


def test_a_hook_failing_in_another_thread_is_an_internal_error_too():
    state = WatchState(Recorder(10))

    def work() -> None:
        from gradscope.watcher.guard import safely

        here = state.threads.here()
        assert not here.home
        safely(state, here, "the backward() hook", lambda: 1 / 0)

    import threading

    thread = threading.Thread(target=work, name="loader")
    thread.start()
    thread.join()
    (fault,) = state.faults
    assert state.off and fault.thread == "loader" and fault.error.startswith("ZeroDivisionError")
    assert "in thread 'loader'" in fault.note()


def test_shielded_work_outside_a_hook_switches_off_and_a_ranks_timeout_passes():
    """A read-back before destroy_process_group (distributed_hooks) runs shielded: a
    failure is gradscope's; a rank's timeout still ends the run."""
    from gradscope.distributed.context import RankTimeout

    state = WatchState(Recorder(10))
    shielded(state, "the read-back before destroy_process_group()", lambda: [][1])
    (fault,) = state.faults
    assert state.off and fault.error.startswith("IndexError")

    def timed_out() -> None:
        raise RankTimeout("gradient norms", 0, (1,), 1.0)

    with pytest.raises(RankTimeout):
        shielded(WatchState(Recorder(10)), "x", timed_out)


def test_a_failure_that_escapes_every_guard_is_still_gradscopes(monkeypatch):
    """A frame of gradscope's own that raised into the script: never "the script raised"."""
    monkeypatch.setattr(Threads, "here", lambda self: user_frame(None))  # raises in errors.py
    out: list[str] = []
    with pytest.raises(AttributeError), gradscope.watch() as w:
        train(out)
    report = w.report
    assert report.run.status == "crashed"
    assert report.failure().startswith("gradscope failed in its own code: AttributeError")
    (fault,) = report.faults
    assert fault.ended and "it reached the script, which stopped there" in fault.note()
    assert exit_code([report.outcome()], Severity.ERROR) == ExitCode.INTERNAL


@pytest.mark.parametrize("where", ["script", "closure", "torch"])
def test_the_users_own_failure_is_still_the_scripts(where):
    """No exit 3 for what the user's code did: raised in the script, in a closure the
    step hook calls, or by torch on the user's call."""
    model = nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def closure() -> torch.Tensor:
        loss = model(torch.ones(1, 2)).sum()
        loss.backward()
        raise ValueError("bad batch")

    with pytest.raises((ValueError, RuntimeError)), gradscope.watch() as w:
        loss = model(torch.ones(1, 2)).sum()
        loss.backward()
        opt.step()
        if where == "script":
            raise ValueError("bad batch")
        if where == "closure":
            opt.step(closure)
        torch.ones(1).backward()  # does not require grad: torch raises
    report = w.report
    assert report.faults == () and report.run.status == "crashed"
    assert report.failure().startswith("the script raised")
    assert exit_code([report.outcome()], Severity.ERROR) == ExitCode.ERROR


def test_a_fault_reads_as_one_note():
    fault = Fault("the backward() hook", 4, "KeyError: 3", "trace", None, True)
    assert fault.note() == (
        "internal error: gradscope failed in the backward() hook at step 4 (KeyError: 3): "
        "the watch was switched off there and training went on. This is a bug in "
        "gradscope: please report it"
    )


@pytest.mark.slow
def test_the_cli_reports_gradscopes_failure_as_its_own_exit_3(runner, monkeypatch):
    from watch_scripts import gradscope as cli
    from watch_scripts import script

    from gradscope.cli import app
    from gradscope.watcher import stepping

    done = cli("watch", "internal_fault.py", "-f", "json")
    assert done.returncode == ExitCode.INTERNAL, done.stderr
    assert done.stderr.count("done ") == 1  # the script's print (stdout holds the report)
    note = "internal error: gradscope failed in the optimizer's post-step hook at step 3"
    assert f"gradscope: error: {note} (ZeroDivisionError: float division by zero)" in done.stderr
    assert "the script raised" not in done.stderr and "Traceback" not in done.stderr
    document = json.loads(done.stdout)
    assert document["summary"]["steps"] == 2 and document["summary"]["status"] == "completed"
    assert any(n.startswith(note) for n in document["summary"]["notes"])
    # --debug in-process: the launch above is the exit-3 process boundary; the script
    # replaces stepping.finish, which this process must get back afterwards
    monkeypatch.setattr(stepping, "finish", stepping.finish)
    debug = runner.invoke(app, ["watch", script("internal_fault.py"), "--debug"])
    assert debug.exit_code == ExitCode.INTERNAL, debug.output
    assert os.path.join("gradscope", "watcher", "guard.py") in debug.stderr  # its own frames


def test_the_read_back_before_destroy_process_group_never_reaches_the_script(monkeypatch):
    """The distributed Session calls it from the script's destroy_process_group()."""
    from gradscope.watcher.distributed_hooks import DistributedWatch

    hooks = DistributedWatch(enabled=False)
    with gradscope.watch() as w:
        hooks.watcher = w
        monkeypatch.setattr(w.recorder, "flush", failing_at(w.recorder.flush, 1))
        hooks._flush()  # what destroy_process_group() runs first
        out: list[str] = []
        train(out)  # the watch is off: the loop runs bare
    (fault,) = w.report.faults
    assert fault.part == "the read-back before destroy_process_group()" and fault.step == 1
    assert w.report.run.steps == []
    assert exit_code([w.report.outcome()], Severity.ERROR) == ExitCode.INTERNAL


def test_what_a_signal_handler_raises_inside_gradscopes_code_is_the_scripts():
    """A DataLoader's SIGCHLD handler raises when a worker was killed, wherever the main
    thread is, gradscope's hooks included: that is the script's failure, let through."""
    import signal

    from gradscope.watcher.guard import safely

    def handler(signum, frame):
        raise RuntimeError("DataLoader worker (pid 1) is killed by signal: Killed.")

    previous = signal.signal(signal.SIGUSR1, handler)
    try:
        state = WatchState(Recorder(10))
        with pytest.raises(RuntimeError, match="DataLoader worker"):
            safely(state, state.threads.here(), "the backward() hook", _signalled)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert state.faults == [] and not state.off


def _signalled() -> None:
    import signal

    signal.raise_signal(signal.SIGUSR1)
    sum(range(10))  # the handler runs here, inside gradscope's work


def test_the_devices_own_error_at_gradscopes_read_back_is_let_through():
    """A device-side assert of the script's kernel surfaces at the next sync, often
    gradscope's read-back: the run ends as it would at the script's next operation."""
    from gradscope.watcher.guard import safely

    def read_back() -> None:
        raise torch.AcceleratorError("CUDA error: device-side assert triggered")

    state = WatchState(Recorder(10))
    with pytest.raises(torch.AcceleratorError):
        safely(state, state.threads.here(), "the optimizer's post-step hook", read_back)
    assert state.faults == []
