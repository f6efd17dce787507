"""A finding said as it happens through the loggers the user attached to the host, each
where it has a channel for text: a TensorBoard writer's text (`gradscope/GS401`, at the
finding's step), a wandb run's alert, an MLflow run's tag (`gradscope.GS401`, one line
per subject). A logger with no text channel (a CSV file) gets none: never a column in
the user's table. No torch, no host imported: each takes the host's own object."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from gradscope.findings import Finding
from gradscope.integrations import live
from gradscope.sinks.mlflow_sink import TAG_CHARS
from gradscope.sinks.protocol import finding_text
from gradscope.sinks.wandb_sink import alert_title

Channel = Callable[[Finding], None]
"""Says one finding (each once: the live judge says a rule and subject once)."""

Thunk = Callable[[], Any]
"""The host's object, fetched when a finding comes (a logger's run starts lazily)."""


def tensorboard(writer: Thunk) -> Channel:
    """A SummaryWriter's (torch's or tensorboardX's) text, under the rule's tag."""

    def say(f: Finding) -> None:
        writer().add_text(f"gradscope/{f.rule}", finding_text(f), f.steps[0] if f.steps else 0)

    return say


def wandb(run: Thunk) -> Channel:
    """A wandb run's alert (recorded offline too; the UI lists it, email or Slack when set).
    Titled as the wandb sink titles its alerts (`alert_title`)."""

    def say(f: Finding) -> None:
        level = "ERROR" if live.stops([f]) else "WARN"
        run().alert(title=alert_title(f), text=live.line(f), level=level)

    return say


def mlflow(client: Thunk, run_id: Thunk) -> Channel:
    """An MLflow run's tag per rule, a line per subject, as the MLflow sink writes it."""
    lines: dict[str, list[str]] = {}

    def say(f: Finding) -> None:
        said = lines.setdefault(f.rule, [])
        said.append(f"{f.severity} {f.subject}: {f.message}")
        client().set_tag(run_id(), f"gradscope.{f.rule}", "\n".join(said)[:TAG_CHARS])

    return say


def wandb_run() -> Any:
    """The process's wandb run (HF's WandbCallback starts it), if wandb is loaded."""
    return getattr(sys.modules.get("wandb"), "run", None)


def mlflow_active() -> Channel | None:
    """The active MLflow run's tags (HF's MLflowCallback starts it), if there is one."""
    module = sys.modules.get("mlflow")
    run = module.active_run() if module is not None else None
    return mlflow_run(run.info.run_id) if run is not None else None


def mlflow_run(run_id: str) -> Channel:
    """A run's tags through a client at the process's tracking URI (mlflow loaded: the
    host's tracker started the run)."""
    module = sys.modules["mlflow"]
    client = module.MlflowClient(tracking_uri=module.get_tracking_uri())
    return mlflow(lambda: client, lambda: run_id)
