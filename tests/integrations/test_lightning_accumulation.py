"""Under Lightning's `accumulate_grad_batches=N` the last micro-batch's backward runs in
the closure given to `optimizer.step`, and the closure returns that micro-batch's loss
alone (divided by N): the step's loss was recorded as a quarter of the objective (0.35
for a 4-class cross-entropy at ln 4 = 1.39), so the summary, the trends and the
'at chance' reading saw a loss N times too small. The step's loss is the sum of every
backward call's since the previous step, the closure's included
(patches/optimizer_step.py)."""

from __future__ import annotations

import math

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched


@pytest.fixture(scope="module", params=["closure", "plain"])
def accumulated(request):
    return domain_watched("closure_accumulation.py", request.param)


def test_the_steps_loss_is_every_micro_batches(accumulated):
    assert not accumulated.faults, accumulated.internal_error()
    steps = accumulated.run.steps
    assert len(steps) == 6
    assert steps[0].backward_calls == 4
    assert steps[0].loss == pytest.approx(math.log(4), rel=1e-5)
    assert steps[-1].loss < steps[0].loss
    assert [f for f in accumulated.findings if f.severity >= Severity.WARNING] == []


@pytest.mark.slow
def test_a_lightning_fit_accumulating_four_records_the_whole_loss(tmp_path):
    import lightning as L
    import torch
    from torch import nn

    from gradscope.integrations.lightning import GradscopeCallback

    torch.manual_seed(0)

    class Net(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
            nn.init.zeros_(self.net[2].weight)
            nn.init.zeros_(self.net[2].bias)

        def training_step(self, batch, i):
            x, y = batch
            return nn.functional.cross_entropy(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    x = torch.randn(128, 8)
    y = torch.randint(0, 4, (128,))
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16)
    callback = GradscopeCallback()
    trainer = L.Trainer(
        max_epochs=1,
        accumulate_grad_batches=4,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[callback],
        default_root_dir=tmp_path,
    )
    trainer.fit(Net(), data)
    steps = callback.report.run.steps
    assert len(steps) == 2 and steps[0].backward_calls == 4
    assert steps[0].loss == pytest.approx(math.log(4), rel=1e-5)
