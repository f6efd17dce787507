"""`--mlflow URI`: the step series into an MLflow run as the run goes, through
`MlflowClient.log_batch` in requests of at most 1,000 metrics (MLflow's limit; one call
per value is what makes logging slow), held until 1,000 have gathered or HOLD_S passed;
findings as tags (`gradscope.GS401`) and whole as the artifact gradscope/findings.json,
the heatmap as the image gradscope/grad_norms.png. The user's active run
(`mlflow.active_run()`) is used when there is one at the first read-back; else gradscope
starts one at URI, in the experiment MLFLOW_EXPERIMENT_NAME names (default "gradscope"),
and ends only that one."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
import time
from typing import TYPE_CHECKING, Any

from gradscope.errors import GradscopeError
from gradscope.sinks.protocol import Sink

if TYPE_CHECKING:
    from gradscope.sinks.protocol import Ending
    from gradscope.sinks.series import Points

# mlflow imported in functions: `gradscope --help` must not load it

MISSING = (
    "--mlflow needs the mlflow package: pip install mlflow "
    "(or the extra: pip install 'torch-gradscope[mlflow]')"
)
BATCH = 1000
"""Metrics per log_batch request: MLflow's own limit."""
HOLD_S = 10.0
"""Metrics are held until a request's worth or this many seconds have gathered (a local
store's request takes tens of milliseconds, however few metrics it carries)."""
TAG_CHARS = 5000
"""A tag's value is cut here (MLflow keeps at most 8,000 characters)."""


def require() -> None:
    """Refuse --mlflow before the run when nothing could be written during it."""
    if importlib.util.find_spec("mlflow") is None:
        raise GradscopeError(MISSING)


class MlflowSink(Sink):
    option = "--mlflow"

    def __init__(self, uri: str, label: str) -> None:
        super().__init__(uri)
        self.label = label
        self.client: Any = None
        self.run_id: str | None = None
        self.started = False
        """gradscope started the run (and ends it); False: the user's."""
        self.hosts: tuple[str, str] | None = None
        """The script's active run and its tracking URI, seen by `bind`."""
        self.held: list[Any] = []
        self.sent = 0.0

    def bind(self) -> None:
        """The script's active run: MLflow keeps it per thread, and the writing is in
        another process. Only where the script imported mlflow (importing it takes
        seconds)."""
        fluent = sys.modules.get("mlflow")
        active = fluent.active_run() if fluent is not None else None
        if fluent is not None and active is not None:
            self.hosts = (active.info.run_id, fluent.get_tracking_uri())

    def _open(self) -> Any:
        from mlflow import MlflowClient

        if self.hosts is not None:
            self.run_id, uri = self.hosts
            self.client = MlflowClient(tracking_uri=uri)
            return self.client
        self.client = MlflowClient(tracking_uri=self.where)
        name = os.environ.get("MLFLOW_EXPERIMENT_NAME") or "gradscope"
        experiment = self.client.get_experiment_by_name(name)
        found = experiment.experiment_id if experiment else self.client.create_experiment(name)
        self.run_id = self.client.create_run(found, run_name=self.label).info.run_id
        self.started = True
        return self.client

    def write_steps(self, points: Points) -> None:
        from mlflow.entities import Metric

        if self.client is None:
            self._open()
            self.sent = time.monotonic()
        now = int(time.time() * 1000)
        self.held += [
            Metric(tag, value, now, step)
            for step, scalars in points
            for tag, value in scalars.items()
        ]
        self._send(everything=time.monotonic() - self.sent >= HOLD_S)

    def _send(self, everything: bool = True) -> None:
        """The held metrics in requests of BATCH; without `everything`, whole ones only."""
        while len(self.held) >= BATCH or (everything and self.held):
            chunk, self.held = self.held[:BATCH], self.held[BATCH:]
            self.client.log_batch(self.run_id, metrics=chunk)
            self.sent = time.monotonic()

    def write_end(self, ending: Ending) -> None:
        client = self.client or self._open()
        self._send()
        by_rule: dict[str, list[str]] = {}
        for f in ending.findings:
            by_rule.setdefault(f.rule, []).append(f"{f.severity} {f.subject}: {f.message}")
        for rule, lines in by_rule.items():
            client.set_tag(self.run_id, f"gradscope.{rule}", "\n".join(lines)[:TAG_CHARS])
        findings = json.dumps([f.to_dict() for f in ending.findings], indent=1, default=str)
        client.log_text(self.run_id, findings, "gradscope/findings.json")
        if ending.heatmap is not None:
            with tempfile.TemporaryDirectory() as folder:
                path = os.path.join(folder, "grad_norms.png")
                with open(path, "wb") as out:
                    out.write(ending.heatmap)
                client.log_artifact(self.run_id, path, "gradscope")

    def close(self) -> None:
        if self.held and self.failure is None:
            self._send()  # a run not judged: no end written, its steps all the same
        if self.started and self.client is not None:
            failed = self.failure is not None
            self.client.set_terminated(self.run_id, "FAILED" if failed else "FINISHED")
