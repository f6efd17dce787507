"""`gradscope watch --wandb PROJECT --mlflow URI --tensorboard DIR`: every sink from the
command line, a missing package refused before the script runs, a sink that fails an
unwritten line (exit 2) under a report that is whole."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from sink_runs import close

pytestmark = pytest.mark.slow  # a subprocess that imports torch, wandb and mlflow; real sinks

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = textwrap.dedent(
    """
    import pathlib, torch
    from torch import nn
    pathlib.Path("ran").write_text("yes")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.001)
    for _ in range(30):
        x = torch.randn(16, 8)
        loss = nn.functional.mse_loss(model(x), x[:, :1])
        loss.backward()  # zero_grad forgotten: GS412
        opt.step()
    """
)


def _gradscope(tmp_path, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "train.py").write_text(SCRIPT)
    env = {
        **os.environ,
        "PYTHONPATH": ROOT,
        "WANDB_MODE": "offline",
        "WANDB_DIR": str(tmp_path),
        "WANDB_SILENT": "true",
        "COLUMNS": "80",
        "NO_COLOR": "1",
    }
    env.pop("MLFLOW_TRACKING_URI", None)
    command = [sys.executable, "-m", "gradscope", "watch", "train.py", *args]
    return subprocess.run(
        command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300
    )


def _in_process(runner, monkeypatch, tmp_path, *args: str, hide: str = ""):
    """`gradscope watch train.py ARGS` in-process, in tmp_path; `hide`: the package looks
    uninstalled (importlib finds no spec for a module that sys.modules holds as None)."""
    from gradscope.cli import app

    (tmp_path / "train.py").write_text(SCRIPT)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    if hide:
        monkeypatch.setitem(sys.modules, hide, None)
    return runner.invoke(app, ["watch", "train.py", *args])


def test_every_sink_from_the_command_line(tmp_path):
    from mlflow import MlflowClient
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from wandb_records import finished_run

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    done = _gradscope(
        tmp_path, "-f", "json", "--wandb", "cli", "--mlflow", uri, "--tensorboard", "tb"
    )
    assert done.returncode == 1, done.stderr  # GS412 found, every sink written
    doc = json.loads(done.stdout)
    assert "GS412" in {f["rule"] for f in doc["findings"]}
    want = {s["step"]: s["loss"] for s in doc["steps"]}
    assert sorted(want) == list(range(1, 31))

    wandb_loss = finished_run(str(tmp_path)).series("gradscope/loss")
    client = MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name("gradscope").experiment_id])
    mlflow_loss = {m.step: m.value for m in client.get_metric_history(run.info.run_id, "loss")}
    assert run.data.tags["gradscope.GS412"] and run.info.run_name == "script train.py"
    events = EventAccumulator(str(tmp_path / "tb"), size_guidance={"scalars": 0})
    events.Reload()
    tb_loss = {e.step: e.value for e in events.Scalars("loss")}
    for got in (wandb_loss, mlflow_loss, tb_loss):
        assert sorted(got) == sorted(want)
        assert all(close(got[s], want[s]) for s in want)


@pytest.mark.parametrize(
    "option, value, package",
    [("--wandb", "p", "wandb"), ("--mlflow", "sqlite:///m.db", "mlflow")],
)
def test_a_missing_package_is_one_line_before_the_run(
    tmp_path, runner, monkeypatch, option, value, package
):
    """In-process: the launch above is the command line's process boundary."""
    done = _in_process(runner, monkeypatch, tmp_path, option, value, hide=package)
    assert done.exit_code == 2, done.output
    assert done.stderr.strip().splitlines() == [
        f"gradscope: error: {option} needs the {package} package: pip install {package} "
        f"(or the extra: pip install 'torch-gradscope[{package}]')"
    ]
    assert not (tmp_path / "ran").exists()


def test_a_sink_that_fails_is_exit_2_under_a_whole_report(tmp_path, runner, monkeypatch):
    (tmp_path / "taken").write_text("mine")
    bad = f"sqlite:///{tmp_path}/taken/mlflow.db"
    done = _in_process(runner, monkeypatch, tmp_path, "-f", "json", "--mlflow", bad)
    assert done.exit_code == 2, done.output
    doc = json.loads(done.stdout)
    assert len(doc["steps"]) == 30 and "GS412" in {f["rule"] for f in doc["findings"]}
    assert f"--mlflow {bad}: writing failed at step 1" in done.stderr
    assert "Traceback" not in done.stderr
