# torch.compile around more than the model, as people write it:
#   whole       forward, backward, clip, step and zero_grad in one compiled function
#   optimizer   PyTorch's compiled-optimizer recipe: opt.step() and sched.step() compiled
#               (fullgraph=False), the lr a tensor
#   fullgraph   clip_grad_norm_ in a fullgraph=True function
# --eager runs the same code uncompiled; --backend picks the compiler (aot_eager: no C++).
import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--mode", choices=["whole", "optimizer", "fullgraph"], required=True)
parser.add_argument("--eager", action="store_true")
parser.add_argument("--backend", default="aot_eager")
parser.add_argument("--clip", type=float, default=0.3)
parser.add_argument("--steps", type=int, default=6)
args = parser.parse_args()


def compiled(fn, fullgraph=False):
    if args.eager:
        return fn
    return torch.compile(fn, backend=args.backend, fullgraph=fullgraph)


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4))
if args.mode == "optimizer":
    opt = torch.optim.Adam(model.parameters(), lr=torch.tensor(0.01))
    sched = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=5)
else:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)


def whole_step(x, y):
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.detach()


def optimizer_step():
    opt.step()
    sched.step()


def clip():
    return torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)


whole_step, optimizer_step = compiled(whole_step), compiled(optimizer_step)
clip = compiled(clip, fullgraph=True)

g = torch.Generator().manual_seed(1)
for _ in range(args.steps):
    x = torch.randn(8, 16, generator=g)
    y = torch.randint(0, 4, (8,), generator=g)
    if args.mode == "whole":
        whole_step(x, y)
        continue
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    if args.mode == "optimizer":
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        optimizer_step()
    else:
        clip()
        opt.step()
    opt.zero_grad()
