"""--mlflow: a real MLflow SQLite store read back through MlflowClient: the series in
requests of at most 1,000 metrics, findings as tags and findings.json, the heatmap, the
user's active run used and left running, a bad URI a line and not the run's end."""

from __future__ import annotations

import importlib.util
import json
import math
import shutil
from collections.abc import Callable

import pytest
from sink_runs import close, in_the_sinks_process, report_series, watched

# mlflow imported in the tests (about 2 s of CPU): not in a worker that never runs them
pytestmark = [
    pytest.mark.slow,  # mlflow's import and store take seconds
    pytest.mark.skipif(importlib.util.find_spec("mlflow") is None, reason="needs mlflow"),
]


@pytest.fixture(scope="module")
def laid_out(tmp_path_factory):
    """An empty store with MLflow's tables made (its migrations: about 2 s of CPU a store),
    which each test copies into a store of its own."""
    from mlflow import MlflowClient

    path = tmp_path_factory.mktemp("mlflow") / "mlflow.db"
    MlflowClient(tracking_uri=f"sqlite:///{path}").search_experiments()
    return path


@pytest.fixture
def store(tmp_path, monkeypatch, laid_out):
    monkeypatch.chdir(tmp_path)  # the runs' artifacts: ./mlruns, as MLflow places them
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    shutil.copy(laid_out, tmp_path / "mlflow.db")
    return f"sqlite:///{tmp_path}/mlflow.db"


def _batches(monkeypatch, tmp_path) -> Callable[[], list[int]]:
    """The sizes of the requests the sinks' process sends, once the run has ended."""
    sizes = tmp_path / "sizes"
    in_the_sinks_process(
        monkeypatch,
        tmp_path / "site",
        f"""
        from mlflow import MlflowClient

        real = MlflowClient.log_batch

        def log_batch(self, run_id, metrics=(), *args, **kwargs):
            with open({str(sizes)!r}, "a") as out:
                out.write(f"{{len(metrics)}}\\n")
            return real(self, run_id, metrics, *args, **kwargs)

        MlflowClient.log_batch = log_batch
        """,
    )
    return lambda: [int(n) for n in sizes.read_text().split()]


def _only_run(uri: str):
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    (experiment,) = [e for e in client.search_experiments() if e.name == "gradscope"]
    (run,) = client.search_runs([experiment.experiment_id])
    return client, run


@pytest.mark.parametrize("steps, flush", [(30, 10), (150, 150)])
def test_the_series_arrive_in_requests_of_at_most_a_thousand(
    store, monkeypatch, tmp_path, steps, flush
):
    """The series in as few requests as MLflow's limit allows; the 30-step run forgets
    zero_grad, and its findings are tags, an artifact, the heatmap an image."""
    requests = _batches(monkeypatch, tmp_path)
    report = watched(steps, forget_zero_grad=steps == 30, mlflow=store, flush_every=flush)
    assert report.judged and not report.run.unwritten, report.run.unwritten
    client, run = _only_run(store)
    assert run.info.status == "FINISHED" and run.info.run_name == "watch"
    for tag in ("loss", "grad_norm/total", "lr"):
        got = {m.step: m.value for m in client.get_metric_history(run.info.run_id, tag)}
        want = report_series(report, tag)
        assert sorted(got) == list(range(1, steps + 1))
        assert all(close(got[s], want[s]) for s in want), tag
    assert len(run.data.metrics) <= 12
    # 30 steps × 8 series in one request, at the end; 150 steps × 8 series in two
    # (1,000 at the read-back, the rest at the end)
    sizes = requests()
    assert max(sizes) <= 1000 and len(sizes) == math.ceil(sum(sizes) / 1000)
    assert len(sizes) == {10: 1, 150: 2}[flush]
    if steps == 30:
        _findings_tagged(client, run, report)


def _findings_tagged(client, run, report) -> None:
    rules = sorted({f.rule for f in report.findings})
    assert "GS412" in rules
    tagged = sorted(
        k.removeprefix("gradscope.") for k in run.data.tags if k.startswith("gradscope.")
    )
    assert tagged == rules
    (piled,) = [f for f in report.findings if f.rule == "GS412"]
    assert run.data.tags["gradscope.GS412"] == f"{piled.severity} {piled.subject}: {piled.message}"
    files = {a.path for a in client.list_artifacts(run.info.run_id, "gradscope")}
    assert files == {"gradscope/findings.json", "gradscope/grad_norms.png"}
    local = client.download_artifacts(run.info.run_id, "gradscope/findings.json")
    with open(local) as f:
        assert sorted({x["rule"] for x in json.load(f)}) == rules
    png = client.download_artifacts(run.info.run_id, "gradscope/grad_norms.png")
    with open(png, "rb") as f:
        assert f.read(4) == b"\x89PNG"


def test_the_users_active_run_is_used_and_left_running(store):
    import mlflow

    mlflow.set_tracking_uri(store)
    mlflow.set_experiment("users-own")
    with mlflow.start_run() as mine:
        report = watched(12, mlflow=store)
        assert not report.run.unwritten
        from mlflow import MlflowClient

        client = MlflowClient(tracking_uri=store)
        assert client.get_run(mine.info.run_id).info.status == "RUNNING"
        history = client.get_metric_history(mine.info.run_id, "loss")
        assert sorted(m.step for m in history) == list(range(1, 13))
    assert [e.name for e in client.search_experiments()].count("gradscope") == 0


@pytest.mark.parametrize("kind", ["a file where the folder goes", "no such scheme"])
def test_an_unreachable_store_is_a_line_and_the_run_goes_on(tmp_path, monkeypatch, kind):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "taken").write_text("mine")
    bad = {
        "a file where the folder goes": f"sqlite:///{tmp_path}/taken/mlflow.db",
        "no such scheme": "nosuchstore://somewhere",
    }[kind]
    report = watched(20, mlflow=bad)
    assert report.run.status == "completed" and len(report.run.steps) == 20
    (line,) = report.run.unwritten
    assert line.startswith(f"--mlflow {bad}: writing failed at step 1 (")
    assert "it stops after 0 steps, the report covers them all" in line
    assert (tmp_path / "taken").read_text() == "mine"


@pytest.mark.parametrize("ending", [RuntimeError, KeyboardInterrupt])
def test_a_run_that_ends_early_delivers_every_step_it_held(store, monkeypatch, tmp_path, ending):
    """MLflow's metrics are held up to 1,000 or 10 s: a run that raises or is interrupted
    after 25 steps still has all 25 in the store, sent in one request when the watch ends."""
    import torch
    from torch import nn

    import gradscope

    requests = _batches(monkeypatch, tmp_path)
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with pytest.raises(ending), gradscope.watch(mlflow=store) as w:
        for step in range(1, 40):
            opt.zero_grad()
            model(torch.randn(8, 4)).pow(2).mean().backward()
            opt.step()
            if step == 25:
                raise ending("stopped")
    steps = [r.step for r in w.report.run.steps]
    assert steps == list(range(1, 26)) and len(requests()) == 1
    client, run = _only_run(store)
    history = client.get_metric_history(run.info.run_id, "loss")
    assert sorted(m.step for m in history) == steps
