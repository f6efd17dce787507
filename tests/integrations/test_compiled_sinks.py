"""torch.compile under the watch and the Lightning callback with every sink on: no graph
break, no recompile, and the series each sink receives are the uncompiled run's."""

from __future__ import annotations

import math
import shutil

import pytest

L = pytest.importorskip("lightning")
pytest.importorskip("tensorboard")
pytest.importorskip("wandb")
pytest.importorskip("mlflow")

pytestmark = pytest.mark.slow  # compiles, a wandb service process, an MLflow store

STEPS = 12


@pytest.fixture(scope="module")
def laid_out(tmp_path_factory):
    """An empty MLflow store with its tables made (its migrations: about 2 s of CPU a
    store), which each test copies into a store of its own."""
    from mlflow import MlflowClient

    path = tmp_path_factory.mktemp("mlflow") / "mlflow.db"
    MlflowClient(tracking_uri=f"sqlite:///{path}").search_experiments()
    return path


@pytest.fixture
def received(tmp_path, monkeypatch, laid_out):
    """Every sink's points as handed to it, by sink; the sinks' options, all in tmp_path."""
    import wandb

    from gradscope.sinks.protocol import Sink

    monkeypatch.chdir(tmp_path)  # MLflow's artifacts: ./mlruns
    for name, value in (("WANDB_MODE", "offline"), ("WANDB_DIR", str(tmp_path))):
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    wandb.teardown()
    got: dict[str, list] = {}
    real = Sink.steps

    def steps(self, points):
        got.setdefault(type(self).__name__, []).extend(points)
        return real(self, points)

    monkeypatch.setattr(Sink, "steps", steps)
    shutil.copy(laid_out, tmp_path / "mlflow.db")
    sinks = {
        "tensorboard": str(tmp_path / "tb"),
        "wandb": "compiled",
        "mlflow": f"sqlite:///{tmp_path}/mlflow.db",
    }
    yield got, sinks
    wandb.teardown()


def _compiled_counts(run):
    """`run(compiled)` compiled from a fresh dynamo, and dynamo's counters after it."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    report = run()
    counted = (
        dict(counters["graph_break"]),
        counters["stats"]["unique_graphs"],
        dict(counters.get("recompiles", {})),
    )
    torch._dynamo.reset()
    return report, counted


def _same_series(got, plain):
    """Each sink's points of the compiled run against the plain run's: the same steps
    and tags, the values within float32's rounding of a reordered sum."""
    assert set(got) == {"TensorboardSink", "WandbSink", "MlflowSink"}
    for points in got.values():
        assert [s for s, _ in points] == [s for s, _ in plain] == list(range(1, STEPS + 1))
        for (_, a), (_, b) in zip(points, plain, strict=True):
            assert a.keys() == b.keys() and {"loss", "grad_norm/total", "lr"} <= a.keys()
            assert all(math.isclose(a[t], b[t], rel_tol=1e-5, abs_tol=1e-7) for t in a), a


def _batches():
    import torch

    g = torch.Generator().manual_seed(1)
    return [torch.randn(16, 8, generator=g) for _ in range(STEPS)]


def _watched(compiled: bool, sinks: dict):
    import torch

    import gradscope

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)

    def loss_of(x):  # the loss inside the compiled code: cross_entropy, which the watch patches
        return torch.nn.functional.cross_entropy(model(x), x[:, :4].argmax(1))

    step_loss = torch.compile(loss_of, backend="aot_eager") if compiled else loss_of
    with gradscope.watch(flush_every=3, **sinks) as w:
        for x in _batches():
            loss = step_loss(x)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            opt.step()
    return w.report


def test_a_compiled_step_under_the_watch_with_every_sink(received, tmp_path):
    got, sinks = received
    report, counted = _compiled_counts(lambda: _watched(True, sinks))
    assert counted == ({}, 1, {})
    assert report.run.unwritten == () and len(report.run.steps) == STEPS
    compiled = dict(got)
    got.clear()
    plain = _watched(False, {"tensorboard": str(tmp_path / "plain")})
    assert plain.run.unwritten == ()
    _same_series(compiled, got["TensorboardSink"])


class Net(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        import torch

        torch.manual_seed(0)
        self.net = torch.nn.Sequential(
            torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)
        )

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, i):
        import torch

        return torch.nn.functional.mse_loss(self(batch), batch[:, :1])

    def configure_optimizers(self):
        import torch

        return torch.optim.SGD(self.parameters(), lr=0.05)


def _fitted(compiled: bool, sinks: dict):
    import torch

    from gradscope.integrations.lightning import GradscopeCallback

    callback = GradscopeCallback(flush_every=3, **sinks)
    model = torch.compile(Net(), backend="aot_eager") if compiled else Net()
    trainer = L.Trainer(
        max_epochs=1,
        callbacks=[callback],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        gradient_clip_val=0.5,
    )
    trainer.fit(model, torch.utils.data.DataLoader(_batches(), batch_size=None))
    return callback.report


def test_a_compiled_module_under_the_lightning_callback_with_every_sink(received, tmp_path):
    got, sinks = received
    report, counted = _compiled_counts(lambda: _fitted(True, sinks))
    assert counted == ({}, 1, {})
    assert report.run.unwritten == () and len(report.run.steps) == STEPS
    compiled = dict(got)
    got.clear()
    plain = _fitted(False, {"tensorboard": str(tmp_path / "plain")})
    assert plain.run.unwritten == ()
    _same_series(compiled, got["TensorboardSink"])
