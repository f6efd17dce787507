"""`gradscope watch` as functions: a training run judged step by step, with what the
command can add to it: a reference run to compare against, a plot, and the sinks that
get the run as it goes (TensorBoard, wandb, MLflow: gradscope/sinks/)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gradscope import config
from gradscope.api.arguments import settings_or_default
from gradscope.api.options import WatchOptions
from gradscope.api.pictures import WatchPictures
from gradscope.diff.runs.live import against as against_reference
from gradscope.errors import GradscopeError
from gradscope.sinks.attached import Sinks
from gradscope.watcher.distributed_hooks import is_main_process, launched_world

# the watcher's session and runner (and the watch judge they load) are imported in functions:
# `gradscope --help` must not load them

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from gradscope.api.watch_keywords import WatchKeywords
    from gradscope.diff.runs.live import Against
    from gradscope.watcher.report import WatchReport


def watch(
    options: WatchOptions | None = None,
    settings: config.Settings | None = None,
    **given: Unpack[WatchKeywords],
) -> Any:
    """`with gradscope.watch() as w: train()`, then `w.report`: every optimizer step of
    `train()` judged over time. `given`: WatchOptions fields over `options` (steps=200,
    log="steps.jsonl"; a misspelt one is one line). `against`: a reference run's `--log`
    to compare every step with (GS607-GS609 join the report); `plot`: a .png, .svg or
    .pdf of the run; `tensorboard`: a folder for its events; `wandb`: a project, `mlflow`:
    a tracking URI, each written as the run goes."""

    from gradscope.watcher.ranked import RankedWatcher
    from gradscope.watcher.session import Watcher

    options = _checked(options, given)
    label = options.label or "watch"
    sinks = sinks_of(options, label)
    kind = RankedWatcher if launched_world() > 1 else Watcher  # torchrun: as the CLI binds
    block = kind(label, settings_or_default(settings), **options.watcher_keywords())
    if options.against is None and options.plot is None and not sinks:
        return block
    return Watching(block, options.against, WatchPictures.of(options.plot), sinks)


def watch_script(
    path: str,
    argv: Sequence[str] = (),
    options: WatchOptions | None = None,
    settings: config.Settings | None = None,
    **given: Unpack[WatchKeywords],
) -> WatchReport:
    """`gradscope watch PATH -- ARGV` without the printing: the WatchReport. `given` as
    for `watch`; a picture or --log that could not be written is a line in
    `report.run.unwritten` (and the outcome's `unwritten`: exit 2)."""

    from gradscope.watcher.runner import run_script

    options = _checked(options, {"argv": tuple(argv), **given} if argv else given)
    settings = settings_or_default(settings)
    pictures = WatchPictures.of(options.plot)
    label = {"label": options.label} if options.label else {}
    sinks = sinks_of(options, options.label or f"script {path}")
    with against_reference(options.against) as compared, sinks:
        report = run_script(
            path,
            list(options.argv),
            options.quiet_stdout,
            settings=settings,
            hang_timeout=options.hang_timeout,
            **label,
            **options.watcher_keywords(),
        )
    return finished(report, compared, pictures, settings, sinks)


def sinks_of(options: WatchOptions, label: str) -> Sinks:
    """The sinks the options ask for, each checked before the run."""
    return Sinks.of(label, options.wandb, options.mlflow, options.tensorboard)


def _checked(options: WatchOptions | None, given: Mapping[str, object]) -> WatchOptions:
    options = WatchOptions.over(options, given)
    if options.nproc_per_node is not None:
        raise GradscopeError(
            "nproc_per_node: ranks are launched by `gradscope watch --nproc-per-node N` or "
            "torchrun; from Python, run your script under torchrun"
        )
    return options


def finished(
    report: WatchReport,
    compared: Against | None,
    pictures: WatchPictures,
    settings: Any,
    sinks: Sinks | None = None,
) -> WatchReport:
    """The comparison's findings joined in, then the pictures drawn and the sinks ended
    (rank 0 only); a sink that failed is a note and an unwritten line, as a --log is."""

    if compared is not None and report.judged:
        report = compared.joined(report, settings_or_default(settings))
    failed = pictures.draw(report) if is_main_process() else []
    failed += sinks.finished(report) if sinks is not None else []
    if failed:
        run = report.run
        notes = (*run.notes, *(line for line in failed if line not in run.notes))
        report = replace(report, run=replace(run, unwritten=(*run.unwritten, *failed), notes=notes))
    return report


class Watching:
    """`gradscope.watch(against=..., plot=..., tensorboard=..., wandb=..., mlflow=...)`: the
    watcher, with the comparison and the sinks around it and the pictures drawn when it
    ends; `report` is the finished one."""

    def __init__(
        self,
        watcher: Any,
        against: str | None,
        pictures: WatchPictures,
        sinks: Sinks | None = None,
    ) -> None:
        self.watcher = watcher
        self.pictures = pictures
        self.sinks = sinks if sinks is not None else Sinks()
        self.report: WatchReport | None = None
        self._against = against
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> Watching:
        self._compared = self._stack.enter_context(against_reference(self._against))
        self._stack.enter_context(self.sinks)
        try:
            self.watcher.__enter__()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: Any) -> bool:
        try:
            swallowed = bool(self.watcher.__exit__(*exc))
        finally:
            self._stack.close()
        settings = self.watcher.settings
        report = self.watcher.report
        self.report = finished(report, self._compared, self.pictures, settings, self.sinks)
        return swallowed

    def __getattr__(self, name: str) -> Any:
        return getattr(self.watcher, name)
