"""The hosts' tests: a read-back and a live judgement at every step, however fast (a
run's steps of a millisecond are otherwise read back at most once in 50 ms and judged
within a 2.5% time budget, so what a test waits for could come at the end only); every
sink's points as handed to it (`received`)."""

from __future__ import annotations

import os
import shutil

import pytest


@pytest.fixture
def every_step(monkeypatch):
    monkeypatch.setattr("gradscope.watcher.recorder.MIN_FLUSH_INTERVAL_S", 0.0)
    monkeypatch.setattr("gradscope.integrations.live.BUDGET", 1.0)


@pytest.fixture(scope="session")
def laid_out(tmp_path_factory):
    """An empty MLflow store with its tables made (its migrations: about 1.5 s of CPU a
    store), which each test copies into a store of its own: made once a session, by the
    first of pytest-xdist's workers to need it (in the run's folder they share)."""
    from filelock import FileLock
    from mlflow import MlflowClient

    base = tmp_path_factory.getbasetemp()
    folder = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    path = folder / "mlflow-laid-out.db"
    with FileLock(f"{path}.lock"):
        if not path.exists():
            made = path.with_suffix(".part")  # no worker copies a store half made
            MlflowClient(tracking_uri=f"sqlite:///{made}").search_experiments()
            made.rename(path)
    return path


@pytest.fixture
def received(tmp_path, monkeypatch, laid_out):
    """Every sink's points as sent to the sinks' process, by sink; the sinks' options,
    all in tmp_path."""
    import wandb

    from gradscope.sinks.attached import Writing

    monkeypatch.chdir(tmp_path)  # MLflow's artifacts: ./mlruns
    for name, value in (("WANDB_MODE", "offline"), ("WANDB_DIR", str(tmp_path))):
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    wandb.teardown()
    got: dict[str, list] = {}
    real = Writing.send

    def send(self, frame):
        if frame[0] == "steps":
            for sink in self.sinks:
                got.setdefault(type(sink).__name__, []).extend(frame[1])
        return real(self, frame)

    monkeypatch.setattr(Writing, "send", send)
    shutil.copy(laid_out, tmp_path / "mlflow.db")
    sinks = {
        "tensorboard": str(tmp_path / "tb"),
        "wandb": "compiled",
        "mlflow": f"sqlite:///{tmp_path}/mlflow.db",
    }
    yield got, sinks
    wandb.teardown()
