"""An HF Trainer run with a seeded bug: `python hf_train.py BUG [--host]`; with --host,
the GradscopeCallback in the Trainer, kept in HOSTED. The model is a tiny
PreTrainedModel from a config around the shared Net. The Trainer zero_grads the model
itself: no-zero-grad is a model whose zero_grad() clears nothing. amp-skips: fp16=True on
CPU makes accelerate build no GradScaler and no autocast (fp16 is GPU-only there), so
the Trainer's accelerator gets the float16 path it would take on a GPU, with torch's
CPU GradScaler."""

import sys
import tempfile

import torch
import transformers
from parity_bugs import MAX_NORM, STEPS, Net, batches, optimizer, scaler, seeded

HOSTED = None


class Config(transformers.PretrainedConfig):
    model_type = "gradscope-parity"

    def __init__(self, bug: str = "healthy", **kwargs) -> None:
        super().__init__(**kwargs)
        self.bug = bug


class Model(transformers.PreTrainedModel):
    config_class = Config

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self.net = Net(config.bug)

    def forward(self, x, labels=None):
        out = self.net(x).float()
        return {"loss": torch.nn.functional.mse_loss(out, labels), "logits": out}

    def zero_grad(self, set_to_none: bool = True) -> None:
        if self.config.bug != "no-zero-grad":
            super().zero_grad(set_to_none)


def data() -> list[dict[str, torch.Tensor]]:
    return [{"x": x, "labels": y} for xs, ys in batches() for x, y in zip(xs, ys, strict=True)]


def trainer(bug: str, out: str, callbacks: list) -> transformers.Trainer:
    model = Model(Config(bug))
    args = transformers.TrainingArguments(
        output_dir=out,
        max_steps=STEPS,
        per_device_train_batch_size=8,
        max_grad_norm=MAX_NORM if bug == "clip-binds" else 0.0,
        lr_scheduler_type="constant",
        logging_steps=1000,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        seed=0,
        fp16=bug == "amp-skips",
    )
    t = transformers.Trainer(
        model=model,
        args=args,
        train_dataset=data(),
        callbacks=callbacks,
        optimizers=(optimizer(model.net), None),
    )
    if bug == "amp-skips":  # what accelerate builds for fp16 on a GPU
        t.accelerator.scaler, t.accelerator.native_amp = scaler(), True
    return t


def main() -> None:
    global HOSTED
    bug, host = sys.argv[1], "--host" in sys.argv[2:]
    seeded()
    callbacks = []
    if host:
        from gradscope.integrations.transformers import GradscopeCallback

        HOSTED = GradscopeCallback()
        callbacks.append(HOSTED)
    with tempfile.TemporaryDirectory() as out:
        trainer(bug, out, callbacks).train()


if __name__ == "__main__":
    main()
