"""accelerate: a tracker, `Accelerator(log_with=[GradscopeTracker()])`, the loop watched
as `gradscope watch` watches a script. `init_trackers` starts the watch, each
`accelerator.log(...)` judges the run so far, `end_training` writes the report; a stop
on an error finding is accelerate's trigger (`if accelerator.check_trigger(): break`).
Imports accelerate: load it only to use it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from accelerate.tracking import GeneralTracker, MLflowTracker, TensorBoardTracker, WandBTracker

from gradscope.api.options import WatchOptions
from gradscope.integrations import channels
from gradscope.integrations.core import HostWatch, python_logger
from gradscope.integrations.ending import Ending
from gradscope.watcher.distributed_hooks import is_main_process

_LOG = python_logger()


def _say(level: int, text: str) -> None:
    if is_main_process():  # as accelerate's logger does (main_process_only)
        _LOG(level, text)


class GradscopeTracker(GeneralTracker, Ending):
    """Every optimizer step between `init_trackers` and `end_training` judged; findings
    logged as they happen (the `gradscope` logger, on the main process), the report at
    the end (to `outputs`, else logged). `stop_on_error`: an error finding sets the
    accelerator's trigger (its `accelerator`, given or set; else `stop_requested`).
    `with tracker:` around the loop starts the watch on every rank (needed under several
    processes: init_trackers runs on the main one only) and ends it, on an exception too.
    Its state goes with `accelerator.register_for_checkpointing(tracker)`. `given`:
    WatchOptions fields."""

    name = "gradscope"
    requires_logging_directory = False
    main_process_only = False
    """Every rank watches: an FSDP2 norm is summed over the ranks' shards."""

    def __init__(
        self,
        options: WatchOptions | None = None,
        outputs: Sequence[str] = (),
        stop_on_error: bool = False,
        settings: Any = None,
        accelerator: Any = None,
        **given: Any,
    ) -> None:
        super().__init__()
        self.watch = HostWatch(options, outputs, stop_on_error, settings, _say, **given)
        self.accelerator = accelerator
        self._told: Any = None
        """The accelerator whose trackers the findings go through (channels set once)."""

    @property
    def tracker(self) -> Any:
        return self.watch

    @property
    def stop_requested(self) -> bool:
        return bool(self.watch.stop_requested)

    def start(self) -> None:
        self.begin()

    def log(self, values: dict[str, Any], step: int | None = None, **kwargs: Any) -> None:
        if self.accelerator is not None and self._told is not self.accelerator:
            self._told = self.accelerator
            if is_main_process():  # the other trackers run on the main process
                self.watch.channels = [
                    c for c in map(_channel, self.accelerator.trackers) if c is not None
                ]
        self.watch.poll()
        if self.watch.stop_requested and self.accelerator is not None:
            self.accelerator.set_trigger()

    def __enter__(self) -> GradscopeTracker:
        """On every rank: the watch starts here (init_trackers runs on the main one only)."""
        self.begin()
        return self

    def finish(self, exc: BaseException | None = None) -> Any:
        return Ending.finish(self, exc)

    def state_dict(self) -> dict[str, Any]:
        return self.watch.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.watch.load_state_dict(state)


def _channel(tracker: Any) -> channels.Channel | None:
    """The tracker's text channel, if it has one."""
    if isinstance(tracker, TensorBoardTracker):
        return channels.tensorboard(lambda: tracker.writer)
    if isinstance(tracker, WandBTracker):
        return channels.wandb(lambda: tracker.run)
    if isinstance(tracker, MLflowTracker):
        return channels.mlflow_run(tracker.active_run.info.run_id)
    return None
