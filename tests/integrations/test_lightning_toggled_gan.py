"""A GAN under Lightning's manual optimization: `toggle_optimizer` freezes the
discriminator through the generator's backward, so the first scan (at the first clip)
found the generator only; the discriminator's first clip measured norms for none of its
parameters, and its first step was recorded with a gradient norm of 0 (its clip's own
total 0.25). A clip of a parameter no scan has tracked scans again
(clipping.ensure_discovered). tests/watcher/domain_scripts/toggled_gan.py steps as
Lightning does, without Lightning."""

from __future__ import annotations

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched


@pytest.fixture(scope="module")
def healthy():
    return domain_watched("toggled_gan.py", "healthy")


@pytest.fixture(scope="module")
def no_zero_grad():
    return domain_watched("toggled_gan.py", "no-zero-grad")


def test_each_optimizers_first_step_has_its_norms(healthy):
    assert not healthy.faults, healthy.internal_error()
    steps = healthy.run.steps
    assert [s.optimizer for s in steps[:4]] == [0, 1, 0, 1]
    for s in steps:
        assert s.grad_norm == pytest.approx(s.clip_total, rel=1e-6), (s.step, s.grad_norm)
        measured = [n for n in s.param_norms if n is not None and n >= 0]
        assert len(measured) == 4, (s.step, s.param_norms)


def test_the_toggled_gan_is_healthy(healthy):
    assert [f for f in healthy.findings if f.severity >= Severity.WARNING] == []


def test_the_discriminators_forgotten_reset_is_named_at_its_second_step(no_zero_grad):
    found = [f for f in no_zero_grad.findings if f.rule == "GS412"]
    assert found and found[0].severity == Severity.ERROR, no_zero_grad.findings
    assert "optimizer 1" in found[0].subject
    assert found[0].steps[0] == 4


@pytest.mark.slow
def test_lightnings_manual_gan_records_the_discriminators_first_norms(tmp_path):
    import lightning as L
    import torch
    from torch import nn

    from gradscope.integrations.lightning import GradscopeCallback

    torch.manual_seed(0)

    class GAN(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.automatic_optimization = False
            self.G = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
            self.D = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))

        def _step(self, opt, loss) -> None:
            self.manual_backward(loss)
            self.clip_gradients(opt, gradient_clip_val=1.0, gradient_clip_algorithm="norm")
            opt.step()
            opt.zero_grad()

        def training_step(self, batch, i):
            (x,) = batch
            opt_g, opt_d = self.optimizers()
            bce = nn.functional.binary_cross_entropy_with_logits
            ones, zeros = torch.ones(len(x), 1), torch.zeros(len(x), 1)
            z = torch.randn(len(x), 4)
            self.toggle_optimizer(opt_g)
            self._step(opt_g, bce(self.D(self.G(z)), ones))
            self.untoggle_optimizer(opt_g)
            self.toggle_optimizer(opt_d)
            fake = self.G(z).detach()
            self._step(opt_d, (bce(self.D(x), ones) + bce(self.D(fake), zeros)) / 2)
            self.untoggle_optimizer(opt_d)

        def configure_optimizers(self):
            return [
                torch.optim.Adam(self.G.parameters(), 2e-3),
                torch.optim.Adam(self.D.parameters(), 2e-3),
            ]

    data = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.randn(64, 2)), batch_size=16
    )
    callback = GradscopeCallback()
    trainer = L.Trainer(
        max_epochs=1,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[callback],
        default_root_dir=tmp_path,
    )
    trainer.fit(GAN(), data)
    steps = callback.report.run.steps
    assert [s.optimizer for s in steps] == [0, 1] * 4
    for s in steps:
        assert s.grad_norm == pytest.approx(s.clip_total, rel=1e-6), (s.step, s.grad_norm)
