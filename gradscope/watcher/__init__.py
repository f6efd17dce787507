"""`gradscope watch` and gradscope.watch(): every optimizer step of an unmodified training
run, judged over time (named watcher so it never shadows the API function).


Stages (collect → plain data → rules → render), one module each:

- patches/      the interception: one patch per torch entry point (optimizer_step:
                torch's global step hooks; backward; zero_grad; clip: clip_grad_norm_ &
                co.; grad_scaler: GradScaler.scale/step; pickling), each with
                install/remove, all behind `patches.intercepting(state)`.
- state.py      `WatchState`, the plain dataclass every patch shares. The logic the
                patches call, a module each: guard.py (the way into a hook; a failure
                of gradscope's own switches the watch off, never reaches the training,
                and faults.py keeps it for the report: exit 3), backward_calls.py,
                stepping.py (a step's start and end: a `PendingStep` of device
                tensors), record_step.py (numbered, to the recorder, --steps),
                resets.py, clipping.py, manual.py (updates by hand), threads.py.
- recorder.py   `Recorder`: queues PendingSteps and reads them back every
                `flush_every` steps in one transfer, producing plain `StepRecord`s.
                **Hook points** (lists, called in order): `on_add` gets each
                PendingStep as it arrives; each of `finalisers` receives the
                [rows, params] tensor of this process's squared per-parameter norms
                (gradients per step, then updates and weights of sampled steps) just
                before the read-back and returns the global ones (e.g.
                `dist.all_reduce(t, SUM)` over FSDP shards): distributed_hooks.py
                registers into both. A different sink for records is
                `Recorder(on_records=fn)`.
- measure.py    `Measure`: gradient/update norm vectors of the tracked parameters.
- noise_scale.py `MicroGrads`: each micro-batch's gradient norm (tensor hooks), the
                small batch of the gradient noise scale (gradscope/steps/noise.py).
- discover.py   which optimizers and modules the script trains, and parameter names.
- gradscope/steps/ the plain data it produces, below the rules: `StepRecord`,
                `ParamInfo`, `WatchRun` (records.py) and the `StepStore` that holds
                the steps (each step's totals in array columns, per-tensor norms at
                a bounded number of steps and in running aggregates): memory per
                step a few numbers, whatever the model's size.
- session.py    `Watcher`, the context manager around it all (hooks always removed),
                and the --log JSONL streamer; listeners.py, who hears each batch of
                steps read back (the status line, `--against`).
- runner.py     run a script as `python train.py ARGS` under a Watcher.
- report.py     `WatchReport`: run + findings, and its `outcome()`; the findings come
                from gradscope/rules/watch.py `judge`, which the session calls once
                at the end (the rules read gradscope/steps/, never this package).

- distributed_hooks.py under torchrun: the distributed Session, registered into the
                recorder's hook points and the Session's `before_destroy`;
                crash_meeting.py, where ranks that died meet.

Rules: gradscope/rules/step*.py, imported by rules/watch.py (GS401-GS430). Views,
beside the renderers that draw them:
gradscope/report/watch_terminal.py, watch_plot.py, watch_groups.py (layer groups),
watch_marks.py (the steps the findings name: `Finding.steps`, no rule run again); JSON
is `WatchReport.to_dict()`.
"""

from __future__ import annotations

from typing import Any

# the session and the runner (torch, the watch judge) are imported in functions: importing a
# module of this package (report.py, for a view) must not load them, nor `gradscope --help`

__all__ = ["watch", "watch_script"]


def watch(**options: Any) -> Any:
    """`with gradscope.watch() as w: train()`; then `w.report` is the WatchReport.

    Options: settings, steps (stop after N optimizer steps), log (a JSONL path),
    update_every (update/weight ratios at each of the first 100 steps, then every N),
    label, batch_size (samples per micro-batch, for the noise scale: seen from the
    model's input when not given).
    """
    from gradscope.watcher.session import Watcher

    return Watcher(**options)


def watch_script(path: str, argv: list[str] | tuple[str, ...] = (), **options: Any) -> Any:
    """Run a training script under watch; returns its WatchReport."""
    from gradscope.watcher.runner import run_script

    return run_script(path, list(argv), **options)
