# An optimizer's update made NaN out of finite gradients, by argv[1]:
#   half-adam   the model in float16 under AdamW (eps 1e-8 is 0 in float16): NaN at step 1
#   half-eps    the same with eps 1e-4 (the advice): healthy
#   bf16-adam   the model in bfloat16 under AdamW (eps 1e-8 is representable): healthy
#   nan-lr      float32, SGD whose lr turns NaN at step 5 (a schedule divided by 0)
# ARGS: MODE [STEPS]
import sys

import torch
import torch.nn.functional as F
from torch import nn

mode = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 20
torch.manual_seed(0)
V, D = 32, 64
table = torch.distributions.Dirichlet(torch.full((V,), 0.3)).sample((V,))
model = nn.Sequential(nn.Embedding(V, D), nn.Linear(D, 128), nn.GELU(), nn.Linear(128, V))
if mode.startswith("half"):
    model = model.half()
elif mode == "bf16-adam":
    model = model.bfloat16()
if mode == "nan-lr":
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
else:
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, eps=1e-4 if mode == "half-eps" else 1e-8)
for step in range(1, steps + 1):
    if mode == "nan-lr" and step == 5:
        opt.param_groups[0]["lr"] = float("nan")
    x = torch.randint(0, V, (256,))
    y = torch.multinomial(table[x], 1).squeeze(1)
    loss = F.cross_entropy(model(x).float(), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
