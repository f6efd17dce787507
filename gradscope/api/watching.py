"""`gradscope watch` as functions: a training run judged step by step, with what the
command can add to it: a reference run to compare against, a plot, TensorBoard events."""

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
from gradscope.watcher.distributed_hooks import is_main_process

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
    .pdf of the run; `tensorboard`: a folder for its events."""

    from gradscope.watcher.session import Watcher

    options = _checked(options, given)
    label = options.label or "watch"
    block = Watcher(label, settings_or_default(settings), **options.watcher_keywords())
    if options.against is None and options.plot is None and options.tensorboard is None:
        return block
    return Watching(block, options.against, WatchPictures.of(options.plot, options.tensorboard))


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
    pictures = WatchPictures.of(options.plot, options.tensorboard)
    label = {"label": options.label} if options.label else {}
    with against_reference(options.against) as compared:
        report = run_script(
            path,
            list(options.argv),
            options.quiet_stdout,
            settings=settings,
            hang_timeout=options.hang_timeout,
            **label,
            **options.watcher_keywords(),
        )
    return finished(report, compared, pictures, settings)


def _checked(options: WatchOptions | None, given: Mapping[str, object]) -> WatchOptions:
    options = WatchOptions.over(options, given)
    if options.nproc_per_node is not None:
        raise GradscopeError(
            "nproc_per_node: ranks are launched by `gradscope watch --nproc-per-node N` or "
            "torchrun; from Python, run your script under torchrun"
        )
    return options


def finished(
    report: WatchReport, compared: Against | None, pictures: WatchPictures, settings: Any
) -> WatchReport:
    """The comparison's findings joined in, then the pictures drawn (rank 0 only)."""

    if compared is not None and report.judged:
        report = compared.joined(report, settings_or_default(settings))
    failed = pictures.draw(report) if is_main_process() else []
    if failed:
        report = replace(
            report, run=replace(report.run, unwritten=(*report.run.unwritten, *failed))
        )
    return report


class Watching:
    """`gradscope.watch(against=..., plot=..., tensorboard=...)`: the watcher, with the
    comparison around it and the pictures drawn when it ends; `report` is the finished one."""

    def __init__(self, watcher: Any, against: str | None, pictures: WatchPictures) -> None:
        self.watcher = watcher
        self.pictures = pictures
        self.report: WatchReport | None = None
        self._against = against
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> Watching:
        self._compared = self._stack.enter_context(against_reference(self._against))
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
        self.report = finished(self.watcher.report, self._compared, self.pictures, settings)
        return swallowed

    def __getattr__(self, name: str) -> Any:
        return getattr(self.watcher, name)
