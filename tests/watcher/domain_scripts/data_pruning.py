"""Data pruning and attribution (EL2N/GraNd, TracIn): a scorer trained a few steps, then a
backward per example with no step (its gradient norm read), then training on the kept
examples. Writes each step's loss and backward calls as the script applies them to
argv[1]. MODE (argv[2]): fresh (a fresh model and a fresh Adam, the scorer reset before
each example's backward), reset_after (the scorer reset after each one, set_to_none=False),
same (TracIn-style: the scorer itself scored, then trained on the kept half by its own
optimizer); bugs: accumulated (as same, in micro-batches with zero_grad inside the
accumulation), fresh-accumulated (as fresh, so, the scorer's last gradients left in
place)."""

import json
import sys

import torch
import torch.nn.functional as F
from torch import nn

out, mode = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
x, y = torch.randn(96, 8), torch.randint(0, 3, (96,))
steps: list[dict] = []


def make() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))


def train(model: nn.Module, opt: torch.optim.Optimizer, idx: torch.Tensor, micro: int = 1):
    for i in range(0, len(idx), 16):
        batch, applied = idx[i : i + 16], 0.0
        opt.zero_grad()
        for part in batch.chunk(micro):
            if micro > 1:
                opt.zero_grad()  # the accumulated bug: only the last part is applied
            loss = F.cross_entropy(model(x[part]), y[part]) / micro
            loss.backward()
            applied = loss.item()
        opt.step()
        steps.append({"loss": applied if micro > 1 else loss.item(), "calls": micro})


scorer = make()
opt = torch.optim.Adam(scorer.parameters(), lr=1e-3)
train(scorer, opt, torch.arange(64))
scores = torch.empty(len(x))
for i in range(len(x)):
    if mode != "reset_after":
        scorer.zero_grad()
    F.cross_entropy(scorer(x[i : i + 1]), y[i : i + 1]).backward()
    scores[i] = torch.sqrt(sum((p.grad**2).sum() for p in scorer.parameters()))
    if mode == "reset_after":
        scorer.zero_grad(set_to_none=False)
keep = scores.argsort(descending=True)[:48]
if mode in ("same", "accumulated"):
    train(scorer, opt, keep.repeat(2), micro=2 if mode == "accumulated" else 1)
else:
    model = make()
    fresh_opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    if mode == "fresh-accumulated":
        train(model, fresh_opt, keep.repeat(2), micro=2)
    else:
        train(model, fresh_opt, keep)
with open(out, "w") as f:
    json.dump({"steps": steps}, f)
