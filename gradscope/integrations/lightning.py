"""Lightning: `Trainer(callbacks=[GradscopeCallback()])`, the run watched as
`gradscope watch` watches a script. Imports lightning: load it only to use it."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from lightning.pytorch.callbacks import Callback
from lightning.pytorch.loggers import MLFlowLogger, TensorBoardLogger, WandbLogger
from lightning.pytorch.utilities import rank_zero_only

from gradscope.api.options import WatchOptions
from gradscope.integrations import channels
from gradscope.integrations.core import HostWatch

LOG = logging.getLogger("lightning.pytorch.callbacks.gradscope")


def _say(level: int, text: str) -> None:
    if getattr(rank_zero_only, "rank", 0) == 0:  # Lightning's loggers say things on rank 0
        LOG.log(level, "%s", text)


class GradscopeCallback(Callback):
    """Every optimizer step of `trainer.fit` judged; findings logged as they happen, the
    report at the end (to `outputs`, else logged). `stop_on_error`: an error finding sets
    `trainer.should_stop`. Its steps go into the checkpoint, so a resumed fit continues
    the report. `given`: WatchOptions fields (steps, log, flush_every, ...)."""

    def __init__(
        self,
        options: WatchOptions | None = None,
        outputs: Sequence[str] = (),
        stop_on_error: bool = False,
        settings: Any = None,
        **given: Any,
    ) -> None:
        super().__init__()
        self.watch = HostWatch(options, outputs, stop_on_error, settings, _say, **given)
        self._batches = 0

    @property
    def report(self) -> Any:
        """The finished report (None before the fit ends)."""
        return self.watch.report

    def on_train_start(self, trainer: Any, _module: Any) -> None:
        self.watch.start()
        if trainer.is_global_zero:  # Lightning's loggers write on rank 0
            self.watch.channels = [c for c in map(_channel, trainer.loggers) if c is not None]

    def on_train_batch_end(self, trainer: Any, _module: Any, *args: Any) -> None:
        self.watch.poll()
        self._batches += 1
        if self.watch.stop_on_error and self._decided(trainer) and self.watch.stop_requested:
            trainer.should_stop = True

    def _decided(self, trainer: Any) -> bool:
        """Whether the stop is decided at this batch. Under several ranks any rank's error
        stops every rank, reduced as EarlyStopping's decision is (a rank that stopped
        alone would leave the others waiting in a collective), once per flush_every
        batches: the cadence of the read-backs the errors come from (the reduction waits
        for the device, as a read-back does)."""
        if trainer.world_size == 1:
            return True
        if self._batches % self.watch.options.flush_every:
            return False
        if trainer.strategy.reduce_boolean_decision(self.watch.stop_requested, all=False):
            if not self.watch.stop_requested:
                self.watch.stop_requested = True
                _say(logging.ERROR, "gradscope: stopping the run on another rank's error")
        return True

    def on_train_end(self, trainer: Any, _module: Any) -> None:
        self.watch.end()

    def on_exception(self, trainer: Any, _module: Any, exception: BaseException) -> None:
        self.watch.end(exception)

    def state_dict(self) -> dict[str, Any]:
        return self.watch.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.watch.load_state_dict(state_dict)


def _channel(logger: Any) -> channels.Channel | None:
    """The logger's text channel, if it has one (a CSVLogger has none)."""
    if isinstance(logger, TensorBoardLogger):
        return channels.tensorboard(lambda: logger.experiment)
    if isinstance(logger, WandbLogger):
        return channels.wandb(lambda: logger.experiment)
    if isinstance(logger, MLFlowLogger):
        return channels.mlflow(lambda: logger.experiment, lambda: logger.run_id)
    return None
