"""A plain torch loop with a seeded bug: `python plain_train.py BUG [--host]`; with
--host, `gradscope.watch()` around the loop (the plain loop's host), its report kept in
HOSTED."""

import sys

import torch
from parity_bugs import MAX_NORM, Net, batches, optimizer, scaler, seeded

HOSTED = None


def train(bug: str) -> None:
    seeded()
    model = Net(bug)
    opt = optimizer(model)
    amp = scaler() if bug == "amp-skips" else None
    for x, y in batches():
        if bug != "no-zero-grad":
            opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16, enabled=amp is not None):
            loss = torch.nn.functional.mse_loss(model(x).float(), y)
        if amp is None:
            loss.backward()
        else:
            amp.scale(loss).backward()
            amp.unscale_(opt)
        if bug == "clip-binds":
            torch.nn.utils.clip_grad_norm_(model.trained(), MAX_NORM)
        if amp is None:
            opt.step()
        else:
            amp.step(opt)
            amp.update()


def main() -> None:
    global HOSTED
    bug, host = sys.argv[1], "--host" in sys.argv[2:]
    if not host:
        train(bug)
        return
    import gradscope

    with gradscope.watch() as HOSTED:
        train(bug)


if __name__ == "__main__":
    main()
