"""A Lightning fit with a seeded bug: `python lightning_train.py BUG [--host]`; with
--host, the GradscopeCallback in the Trainer, kept in HOSTED. amp-skips: float16
autocast with torch's CPU GradScaler (MixedPrecision's plugin as on a GPU: on CPU,
precision="16-mixed" falls back to bf16, which has no scaler)."""

import sys

import lightning as L
import torch
from parity_bugs import MAX_NORM, STEPS, Net, loader, optimizer, scaler, seeded

HOSTED = None


class Module(L.LightningModule):
    def __init__(self, bug: str) -> None:
        super().__init__()
        self.net = Net(bug)
        self.bug = bug
        self.automatic_optimization = bug != "no-zero-grad"

    def training_step(self, batch, i):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x).float(), y)
        if self.bug == "no-zero-grad":  # manual optimization that never calls zero_grad
            self.manual_backward(loss)
            self.optimizers().step()
        return loss

    def configure_optimizers(self):
        return optimizer(self.net)


def main() -> None:
    global HOSTED
    bug, host = sys.argv[1], "--host" in sys.argv[2:]
    seeded()
    callbacks = []
    if host:
        from gradscope.integrations.lightning import GradscopeCallback

        HOSTED = GradscopeCallback()
        callbacks.append(HOSTED)
    plugins = []
    if bug == "amp-skips":
        from lightning.pytorch.plugins import MixedPrecision

        plugins.append(MixedPrecision("16-mixed", "cpu", scaler=scaler()))
    clip = {"gradient_clip_val": MAX_NORM} if bug == "clip-binds" else {}
    trainer = L.Trainer(
        max_steps=STEPS,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=callbacks,
        plugins=plugins,
        **clip,
    )
    trainer.fit(Module(bug), loader())


if __name__ == "__main__":
    main()
