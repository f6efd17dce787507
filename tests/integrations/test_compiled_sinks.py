"""torch.compile under the watch with every sink on and under the Lightning callback
with one: no graph break, no recompile, and the series each sink receives are the
uncompiled run's."""

from __future__ import annotations

import importlib.util

import pytest
from compiled_runs import STEPS, batches, compiled_counts, same_series

L = pytest.importorskip("lightning")

# the sinks' packages imported where the runs use them, not in every worker that collects this
pytestmark = [
    pytest.mark.slow,  # compiles, a wandb service process, an MLflow store
    pytest.mark.skipif(
        any(importlib.util.find_spec(p) is None for p in ("tensorboard", "wandb", "mlflow")),
        reason="needs tensorboard, wandb and mlflow",
    ),
]


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
        for x in batches():
            loss = step_loss(x)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            opt.step()
    return w.report


def test_a_compiled_step_under_the_watch_with_every_sink(received, tmp_path):
    got, sinks = received
    report, counted = compiled_counts(lambda: _watched(True, sinks))
    assert counted == ({}, 1, {})
    assert report.run.unwritten == () and len(report.run.steps) == STEPS
    compiled = dict(got)
    got.clear()
    plain = _watched(False, {"tensorboard": str(tmp_path / "plain")})
    assert plain.run.unwritten == ()
    same_series(compiled, got["TensorboardSink"])


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
    trainer.fit(model, torch.utils.data.DataLoader(batches(), batch_size=None))
    return callback.report


def test_a_compiled_module_under_the_lightning_callback_with_a_sink(received, tmp_path):
    got, sinks = received
    # the sinks write in a process of their own: which are on changes nothing the
    # compiled graph sees (the compiled step under the watch has every one)
    sinks = {"tensorboard": sinks["tensorboard"]}
    report, counted = compiled_counts(lambda: _fitted(True, sinks))
    assert counted == ({}, 1, {})
    assert report.run.unwritten == () and len(report.run.steps) == STEPS
    compiled = dict(got)
    got.clear()
    plain = _fitted(False, {"tensorboard": str(tmp_path / "plain")})
    assert plain.run.unwritten == ()
    same_series(compiled, got["TensorboardSink"])
