"""A Lightning DDP fit (2 CPU ranks, gloo) with the callback's opt-in stop, where only
rank 1 judges the run as it goes (rank 0's live judge is never due: as when its time
budget has not come round) and rank 1's batches turn NaN from step 6 on. A read-back
and the stop's reduction every 4 batches: rank 1 sees the NaN at step 8, both stop there.

    torchrun --standalone --nproc_per_node=2 lightning_ddp_stop.py FOLDER

(tests/distributed/test_dist_stop.py runs it in its shared launch.)

Each rank writes FOLDER/rank<N>.json (the step it stopped at, its report's status, the
findings it said); rank 0 writes the report, FOLDER/report.json. A rank that stopped
alone would leave the other waiting in DDP's all-reduce: the 30 s timeout fails it.
"""

import json
import os
import sys
from datetime import timedelta

import lightning as L
import torch
from lightning.pytorch.strategies import DDPStrategy

from gradscope.integrations.lightning import GradscopeCallback

MAX_STEPS = 40


class Net(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(
            torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)
        )

    def training_step(self, batch, i):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        if self.global_rank == 1 and self.global_step >= 5:
            loss = loss * float("nan")
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.net.parameters(), lr=0.05)


def main(folder: str) -> None:
    import gradscope.integrations.live as live
    import gradscope.watcher.recorder as recorder

    recorder.MIN_FLUSH_INTERVAL_S, live.BUDGET = 0.0, 1.0  # read back every 4 steps, judged at each
    rank = int(os.environ["RANK"])
    cb = GradscopeCallback(
        outputs=[os.path.join(folder, "report.json")], stop_on_error=True, flush_every=4
    )
    if rank == 0:
        cb.watch.live.ready_at = float("inf")
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(8 * MAX_STEPS * 2, 8, generator=g)
    data = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True) / 3), batch_size=8
    )
    trainer = L.Trainer(
        max_steps=MAX_STEPS,
        accelerator="cpu",
        devices=2,
        strategy=DDPStrategy(process_group_backend="gloo", timeout=timedelta(seconds=30)),
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[cb],
        use_distributed_sampler=False,
    )
    trainer.fit(Net(), data)
    said = [f.rule for f in cb.watch.findings]
    status = cb.report.run.status if cb.report is not None else None
    with open(os.path.join(folder, f"rank{rank}.json"), "w") as out:
        json.dump({"step": trainer.global_step, "status": status, "said": said}, out)


if __name__ == "__main__":
    main(sys.argv[1])
