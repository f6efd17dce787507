"""An accelerate loop with a seeded bug: `python accelerate_train.py BUG [--host]`; with
--host, the GradscopeTracker in `log_with`, kept in HOSTED. amp-skips: mixed_precision
"fp16" on CPU makes accelerate build no GradScaler and no autocast (fp16 is GPU-only
there), so the Accelerator gets the float16 path it takes on a GPU, with torch's CPU
GradScaler, before `prepare`."""

import sys

import accelerate
import torch
from parity_bugs import MAX_NORM, Net, loader, optimizer, scaler, seeded

HOSTED = None


def main() -> None:
    global HOSTED
    bug, host = sys.argv[1], "--host" in sys.argv[2:]
    seeded()
    if host:
        from gradscope.integrations.accelerate import GradscopeTracker

        HOSTED = GradscopeTracker()
    fp16 = {"mixed_precision": "fp16"} if bug == "amp-skips" else {}
    acc = accelerate.Accelerator(cpu=True, log_with=[HOSTED] if host else None, **fp16)
    if bug == "amp-skips":  # what accelerate builds for fp16 on a GPU
        acc.scaler, acc.native_amp = scaler(), True
    model = Net(bug)
    model, opt, data = acc.prepare(model, optimizer(model), loader())
    acc.init_trackers("parity")
    for x, y in data:
        loss = torch.nn.functional.mse_loss(model(x).float(), y)
        acc.backward(loss)
        if bug == "clip-binds":
            acc.clip_grad_norm_(model.trained(), MAX_NORM)
        opt.step()
        if bug != "no-zero-grad":
            opt.zero_grad()
        acc.log({"loss": float(loss.detach())})
    acc.end_training()


if __name__ == "__main__":
    main()
