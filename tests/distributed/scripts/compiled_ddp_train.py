"""A compiled DDP model (torch.compile over the DDP wrapper: dynamo's DDPOptimizer splits
its graph at the gradient buckets), AdamW and a clip: gradscope's own hooks on the model
and the optimizer must run outside dynamo."""

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU())
    model.append(nn.Linear(64, 4))
    net = torch.compile(DDP(model), backend="aot_eager")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(rank)
    for _ in range(8):
        x, y = torch.randn(8, 32, generator=g), torch.randint(0, 4, (8,), generator=g)
        loss = nn.functional.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
