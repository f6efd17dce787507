"""HF Transformers: `Trainer(callbacks=[GradscopeCallback()])`, the run watched as
`gradscope watch` watches a script. Imports transformers: load it only to use it."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from transformers.trainer_callback import ExportableState, TrainerCallback
from transformers.utils import logging as hf_logging

from gradscope.api.options import WatchOptions
from gradscope.integrations import channels
from gradscope.integrations.core import HostWatch
from gradscope.integrations.ending import Ending

LOG = hf_logging.get_logger("transformers.gradscope")


def _say(level: int, text: str) -> None:
    LOG.log(max(level, logging.WARNING), "%s", text)  # transformers shows warnings and up


class GradscopeCallback(TrainerCallback, ExportableState, Ending):
    """Every optimizer step of `trainer.train()` judged; findings logged as they happen
    (transformers' logger), the report at the end (to `outputs`, else logged).
    `stop_on_error`: an error finding sets `control.should_training_stop`. Its steps go
    into the checkpoint's trainer_state.json (`stateful_callbacks`), so a resumed train
    continues the report. The Trainer has no hook for an exception: `with callback:`
    around `trainer.train()` ends the watch with it (else it ends at the process's exit).
    `given`: WatchOptions fields (steps, log, flush_every, ...)."""

    def __init__(
        self,
        options: WatchOptions | None = None,
        outputs: Sequence[str] = (),
        stop_on_error: bool = False,
        settings: Any = None,
        **given: Any,
    ) -> None:
        self.watch = HostWatch(options, outputs, stop_on_error, settings, _say, **given)
        self._args = {"outputs": list(self.watch.outputs), "stop_on_error": stop_on_error}

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        # a new TrainerState holds every callback's state() as it is: a train started
        # afresh (global step 0) does not continue an earlier one's report
        saved = (state.stateful_callbacks or {}).get(type(self).__name__)
        if isinstance(saved, list):  # one entry per callback of the class: the first is ours
            saved = saved[0] if saved else None
        if saved and state.global_step > 0 and not self.watch.active:  # resumed only
            self.watch.load_state_dict(saved.get("attributes", {}).get("gradscope", {}))
        self.begin()
        if state.is_world_process_zero:  # the report_to integrations ran their setup before
            self.watch.channels = _channels(args.report_to or [])

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        self.watch.poll()
        if self.watch.stop_requested:
            control.should_training_stop = True
        return control

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.finish()

    def state(self) -> dict[str, Any]:
        return {"args": dict(self._args), "attributes": {"gradscope": self.watch.state_dict()}}


def _channels(report_to: Any) -> list[channels.Channel]:
    """The report_to integrations whose run is the process's: wandb's run (alerts), MLflow's
    active run (tags). TensorBoardCallback's writer is its own: no text from here."""
    found = []
    run = channels.wandb_run() if "wandb" in report_to else None
    if run is not None:
        found.append(channels.wandb(lambda: run))
    tags = channels.mlflow_active() if "mlflow" in report_to else None
    if tags is not None:
        found.append(tags)
    return found
