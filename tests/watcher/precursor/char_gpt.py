# A char-level GPT (2 layers, d=48, context 16) on text of a Markov chain over 27
# symbols, AdamW with warm-up, that diverges by one mechanism picked by argv[1]:
#   healthy  lr 1e-2 after warm-up, throughout (the control of both below)
#   jump     lr x10 at step 200 (a schedule's units confused)
#   ramp     lr x1.2 per step after step 120 (the ramp protocol)
#   restart  a cosine schedule restarted at step 200, back to its peak: healthy
#   vlag     one batch at step 200 whose gradient is 1000x (its loss scaled): Adam's second
#            moment lags it
#   vlag-layer  a one-step penalty at step 200 on one layer's weight (blocks.1.mlp.2):
#            that tensor's gradient jumps 1000x, the others' do not
# ARGS: MODE [STEPS]
import math
import sys

import torch
from markov_text import batches

from gradscope.examples.transformer import GPT, GPTConfig

mode = sys.argv[1] if len(sys.argv) > 1 else "healthy"
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 300
torch.manual_seed(0)
V, T, B, WARMUP = 27, 16, 32, 20
PEAK = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-2
table = torch.distributions.Dirichlet(torch.full((V,), 0.2)).sample((V,))
data = batches(table, 1, B, T)  # markov_text.py: drawn once a process


def lr_at(step: int) -> float:
    lr = PEAK * min(1.0, step / WARMUP)
    if mode == "jump" and step >= 200:
        lr *= 10
    if mode == "ramp" and step > 120:
        lr *= 1.2 ** (step - 120)
    if mode == "restart":
        cycle = 200
        lr = 3e-4 + 0.5 * (PEAK - 3e-4) * (1 + math.cos(math.pi * (step % cycle) / cycle))
        lr *= min(1.0, step / WARMUP)
    return lr


model = GPT(GPTConfig(vocab=V, context=T, dim=48, heads=4, layers=2))
opt = torch.optim.AdamW(model.parameters(), lr=PEAK, weight_decay=0.1)
for step in range(1, steps + 1):
    for group in opt.param_groups:
        group["lr"] = lr_at(step)
    x, y = next(data)
    loss = model(x, y).loss
    if mode == "vlag" and step == 200:
        loss = loss * 1000.0
    if mode == "vlag-layer" and step == 200:
        loss = loss + 50.0 * model.blocks[1].mlp[2].weight.square().sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
