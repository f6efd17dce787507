# GradScaler on CPU with bfloat16 (or --dtype float16) autocast. wrong: clip_grad_norm_
# before (without) scaler.unscale_, the classic mistake; right: unscale_ then clip;
# noclip; fused_*: the same with Adam(fused=True); skip: wrong, with an Inf gradient at
# step 3. Writes the true (unscaled) numbers of each step to --out.
import argparse

import step_oracle as oracle
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--case", required=True)
parser.add_argument("--out", required=True)
parser.add_argument("--dtype", default="bfloat16")
args = parser.parse_args()
torch.manual_seed(0)
case = args.case
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
named = list(model.named_parameters())
opt = torch.optim.Adam(model.parameters(), lr=1e-3, fused=case.startswith("fused"))
scaler = torch.amp.GradScaler("cpu", init_scale=2.0**16)
seen = []
for step in range(1, 7):
    x, y = torch.randn(16, 8), torch.randn(16, 1)
    with torch.autocast("cpu", dtype=getattr(torch, args.dtype)):
        loss = nn.functional.mse_loss(model(x).float(), y)
    opt.zero_grad()
    scaler.scale(loss).backward()
    if case == "skip" and step == 3:
        model[0].weight.grad[0, 0] = float("inf")
    scale = scaler.get_scale()
    unscaled = case.endswith("right")
    if unscaled:
        scaler.unscale_(opt)
    divide = 1.0 if unscaled else scale
    norms = {n: (v / divide) for n, v in oracle.grads(named).items()}
    clip = clipped = None
    if case != "noclip":
        clip = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0).item() / divide
        clipped = oracle.total(oracle.grads(named).values()) / divide
    scaler.step(opt)
    scaler.update()
    seen.append(
        {
            "loss": loss.item(),
            "params": norms,
            "grad_norm": oracle.total(norms.values()),
            "clip": clip,
            "clipped": clipped,
            "scale": scale,
            "skipped": scaler.get_scale() < scale,
        }
    )
oracle.dump(args.out, seen)
