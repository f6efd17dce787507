# GradScaler × {fused, non-fused Adam} × {explicit unscale_, none} × {enabled, disabled};
# an Inf gradient is injected at steps 5 and 12. The script writes what it saw itself
# (true unscaled norm, loss, whether the scaler skipped) to the file given with --out.
import argparse
import json

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--fused", action="store_true")
parser.add_argument("--unscale", action="store_true")
parser.add_argument("--disabled", action="store_true")
parser.add_argument("--out", required=True)
args = parser.parse_args()

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3, fused=args.fused)
scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, enabled=not args.disabled)
seen = []
for step in range(1, 21):
    x, y = torch.randn(16, 8), torch.randn(16, 1)
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    scaler.scale(loss).backward()
    if step in (5, 12):
        model[0].weight.grad[0, 0] = float("inf")
    before = scaler.get_scale() if scaler.is_enabled() else 1.0
    if args.unscale:
        scaler.unscale_(opt)
        divide = 1.0
    else:
        divide = before
    grads = [p.grad for p in model.parameters()]
    norm = torch.linalg.vector_norm(torch.stack([g.norm() for g in grads])).item() / divide
    scaler.step(opt)
    scaler.update()
    after = scaler.get_scale() if scaler.is_enabled() else 1.0
    seen.append({"loss": loss.item(), "norm": norm, "skipped": after < before})
with open(args.out, "w") as f:
    json.dump(seen, f)
