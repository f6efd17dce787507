"""Findings as they happen through the loggers the user attached to the host, read back
from what each received: Lightning's TensorBoardLogger (its event file), WandbLogger (an
offline run's alerts), MLFlowLogger (a SQLite store's tags) and CSVLogger (no text
channel: nothing in its table); the HF Trainer's report_to wandb and mlflow; an accelerate
loop's tensorboard, wandb and mlflow trackers. Each finding once; a healthy run, none."""

from __future__ import annotations

import glob
import importlib.util
import os
import shutil
import sys

import pytest

L = pytest.importorskip("lightning")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "sinks"))

from wandb_records import finished_run  # noqa: E402

# wandb and mlflow imported where the tests use them, not in every worker that collects this
pytestmark = [
    pytest.mark.slow,  # real hosts, a wandb service process
    pytest.mark.skipif(
        any(importlib.util.find_spec(p) is None for p in ("wandb", "mlflow", "tensorboard")),
        reason="needs wandb, mlflow and tensorboard",
    ),
]


@pytest.fixture(scope="module")
def mlflow_uri(tmp_path_factory, laid_out):
    """One SQLite store for the module (a copy of the session's laid-out one: its tables
    cost seconds to make), each test in an experiment of its own; mlflow's process-wide
    URI (Lightning's MLFlowLogger sets it too) unset after."""
    import mlflow

    path = tmp_path_factory.mktemp("mlflow") / "mlflow.db"
    shutil.copy(laid_out, path)
    uri = f"sqlite:///{path}"
    mlflow.set_tracking_uri(uri)
    yield uri
    mlflow.set_tracking_uri(None)


def _texts(directory) -> dict[str, list[tuple[int, str]]]:
    """Every text an event file under `directory` holds, by tag: (step, text)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    found: dict[str, list[tuple[int, str]]] = {}
    for path in glob.glob(os.path.join(str(directory), "**", "events.out.*"), recursive=True):
        events = EventAccumulator(path, size_guidance={"tensors": 0})
        events.Reload()
        for tag in events.Tags()["tensors"]:
            for e in events.Tensors(tag):
                text = e.tensor_proto.string_val[0].decode()
                found.setdefault(tag.removesuffix("/text_summary"), []).append((e.step, text))
    return found


def _tags(uri: str, run_id: str) -> dict[str, str]:
    from mlflow import MlflowClient

    return MlflowClient(uri).get_run(run_id).data.tags


def _gradscope(found) -> dict:
    return {k: v for k, v in found.items() if "gradscope" in k.lower()}


class Net(L.LightningModule):
    """A tiny regression whose loss is NaN from step `nan_at` on (None: healthy)."""

    def __init__(self, nan_at: int | None) -> None:
        super().__init__()
        import torch

        torch.manual_seed(0)
        self.net = torch.nn.Sequential(
            torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)
        )
        self.nan_at = nan_at

    def training_step(self, batch, i):
        import torch

        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        if self.nan_at is not None and self.global_step >= self.nan_at:
            loss = loss * float("nan")
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        import torch

        return torch.optim.SGD(self.net.parameters(), lr=0.05)


def _data():
    import torch

    g = torch.Generator().manual_seed(0)
    x = torch.randn(96, 8, generator=g)
    return torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True) / 3), batch_size=8
    )


def _lightning_fit(tmp_path, nan_at, loggers):
    from gradscope.integrations.lightning import GradscopeCallback

    cb = GradscopeCallback()
    trainer = L.Trainer(
        max_steps=10,
        accelerator="cpu",
        logger=loggers,
        log_every_n_steps=1,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[cb],
    )
    trainer.fit(Net(nan_at), _data())
    return cb


def test_lightning_loggers_each_get_every_finding_once(
    tmp_path, wandb_offline, mlflow_uri, every_step
):
    from lightning.pytorch.loggers import CSVLogger, MLFlowLogger, TensorBoardLogger, WandbLogger

    tb = TensorBoardLogger(str(tmp_path / "tb"))
    csv = CSVLogger(str(tmp_path / "csv"))
    ml = MLFlowLogger(experiment_name="hosts", tracking_uri=mlflow_uri)
    wb = WandbLogger(project="hosts", save_dir=str(tmp_path), offline=True)
    cb = _lightning_fit(tmp_path, 4, [tb, csv, ml, wb])
    said = cb.watch.findings
    assert "GS401" in {f.rule for f in said}, said
    texts = _gradscope(_texts(tmp_path / "tb"))
    want = sorted((f"gradscope/{f.rule}", f.steps[0]) for f in said)
    assert sorted((tag, step) for tag, got in texts.items() for step, _ in got) == want
    for f in said:
        assert any(f.subject in text for _, text in texts[f"gradscope/{f.rule}"])
    tags = _gradscope(_tags(mlflow_uri, ml.run_id))
    assert sorted(tags) == sorted({f"gradscope.{f.rule}" for f in said})
    for f in said:
        assert tags[f"gradscope.{f.rule}"].count(f"{f.severity} {f.subject}:") == 1
    run_id = wb.experiment.id
    wb.experiment.finish()
    alerts = finished_run(str(tmp_path), run_id).alerts
    assert sorted(a.title for a in alerts) == sorted(
        f"gradscope {f.rule} {f.slug}: {f.subject}"[:63] for f in said
    )
    assert {a.level for a in alerts if "GS401" in a.title} == {"ERROR"}
    (table,) = glob.glob(str(tmp_path / "csv" / "**" / "metrics.csv"), recursive=True)
    with open(table) as lines:
        assert "gradscope" not in lines.read().lower()


def test_a_healthy_lightning_fit_says_nothing_to_its_logger(tmp_path, every_step):
    from lightning.pytorch.loggers import TensorBoardLogger

    cb = _lightning_fit(tmp_path, None, [TensorBoardLogger(str(tmp_path / "tb"))])
    assert cb.watch.findings == []
    assert _gradscope(_texts(tmp_path / "tb")) == {}


def _nan_model(nan_at: int):
    """A regression for the HF Trainer and accelerate whose loss is NaN from call
    `nan_at` on."""
    import torch

    class Reg(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.net = torch.nn.Sequential(
                torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)
            )
            self.calls = 0

        def forward(self, x, labels):
            self.calls += 1
            loss = torch.nn.functional.mse_loss(self.net(x), labels)
            return {"loss": loss * float("nan") if self.calls > nan_at else loss}

    return Reg()


def _rows():
    import torch

    g = torch.Generator().manual_seed(0)
    x = torch.randn(80, 8, generator=g)
    return [{"x": r, "labels": r.sum(0, keepdim=True) / 3} for r in x]


def _finished_mlflow_run(uri: str, experiment: str):
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    (run,) = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    return run.data.tags


def test_hf_report_to_wandb_and_mlflow_get_every_finding_once(
    tmp_path, wandb_offline, mlflow_uri, monkeypatch, every_step
):
    transformers = pytest.importorskip("transformers")
    from gradscope.integrations.transformers import GradscopeCallback

    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "hf-hosts")
    monkeypatch.setenv("WANDB_PROJECT", "hf-hosts")
    cb = GradscopeCallback(flush_every=2)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"),
        max_steps=8,
        per_device_train_batch_size=8,
        logging_steps=1000,
        save_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
        seed=0,
        report_to=["wandb", "mlflow", "tensorboard"],
    )
    transformers.Trainer(
        model=_nan_model(3), args=args, train_dataset=_rows(), callbacks=[cb]
    ).train()
    said = cb.watch.findings
    assert "GS401" in {f.rule for f in said}, said
    tags = _gradscope(_finished_mlflow_run(mlflow_uri, "hf-hosts"))
    assert sorted(tags) == sorted({f"gradscope.{f.rule}" for f in said})
    for f in said:
        assert tags[f"gradscope.{f.rule}"].count(f"{f.severity} {f.subject}:") == 1
    import wandb

    wandb.finish()
    alerts = finished_run(str(tmp_path)).alerts
    assert sorted(a.title for a in alerts) == sorted(
        f"gradscope {f.rule} {f.slug}: {f.subject}"[:63] for f in said
    )
    assert _gradscope(_texts(tmp_path / "out")) == {}  # TensorBoardCallback's writer is its own


def test_accelerate_trackers_get_every_finding_once(
    tmp_path, wandb_offline, mlflow_uri, monkeypatch, every_step
):
    accelerate = pytest.importorskip("accelerate")
    import torch

    from gradscope.integrations.accelerate import GradscopeTracker

    tracker = GradscopeTracker(flush_every=2)
    acc = accelerate.Accelerator(
        cpu=True,
        log_with=["tensorboard", "wandb", "mlflow", tracker],
        project_dir=str(tmp_path / "tb"),
    )
    tracker.accelerator = acc
    model = _nan_model(3)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    model, opt = acc.prepare(model, opt)
    acc.init_trackers("acc-hosts")
    for i, row in enumerate(_rows()[:8]):
        loss = model(row["x"][None], row["labels"][None])["loss"]
        acc.backward(loss)
        opt.step()
        opt.zero_grad()
        acc.log({"loss": float(loss)}, step=i)
    acc.end_training()
    said = tracker.watch.findings
    assert "GS401" in {f.rule for f in said}, said
    texts = _gradscope(_texts(tmp_path / "tb"))
    assert sorted(texts) == sorted({f"gradscope/{f.rule}" for f in said})
    assert sum(len(v) for v in texts.values()) == len(said)
    tags = _gradscope(_finished_mlflow_run(mlflow_uri, "acc-hosts"))
    assert sorted(tags) == sorted({f"gradscope.{f.rule}" for f in said})
    alerts = finished_run(str(tmp_path)).alerts
    assert sorted(a.title for a in alerts) == sorted(
        f"gradscope {f.rule} {f.slug}: {f.subject}"[:63] for f in said
    )
