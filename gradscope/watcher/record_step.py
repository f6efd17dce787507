"""A step ends: it is numbered (threads end their steps in any order), handed to the
recorder, and --steps is checked. Shared by optimizer steps (stepping.py) and updates by
hand (manual.py)."""

from __future__ import annotations

import time

from gradscope.watcher import nan_probe
from gradscope.watcher.recorder import PendingStep
from gradscope.watcher.state import WatchState
from gradscope.watcher.threads import ThreadState, Window


def record(state: WatchState, here: ThreadState, current: PendingStep) -> None:
    """Hand the step to the recorder (none past --steps); this thread's next step
    starts afresh."""
    if here.window.calls:  # else a later optimizer on the same calls: they stay taken
        here.taken, here.taken_by = here.window, set()
    here.taken_by.add(current.optimizer)
    here.window = Window()  # the clip stays for the other optimizers it touched
    here.scaled = []
    here.scaled_by = None  # the step unscaled them (or skipped): a later clip is not
    here.zeroed = None
    if state.stopped:
        return
    add(state, current)
    if state.max_steps is not None and state.steps >= state.max_steps:
        state.stopped = True
        if not here.home:
            state.notes.append(
                f"--steps {state.max_steps} was reached in thread {here.name!r}: later "
                "steps are not recorded, and the script ran on until its main thread "
                "next called backward, step or zero_grad, or ended"
            )


def add(state: WatchState, current: PendingStep) -> None:
    """Number the step and give it to the recorder."""
    state.steps += 1
    current.step = state.steps
    state.graph_marks.stepper = current.optimizer
    current.time_s = time.perf_counter() - state.start
    finite = current.param_norm is state.measure.finite
    nan_probe.early(state.probe, state.recorder, current, finite)
    state.recorder.add(current)
