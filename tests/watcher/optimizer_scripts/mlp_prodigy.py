"""A small MLP classifier under Prodigy (vendored prodigyopt 1.1.2, lr=1 as documented):
`mlp_prodigy.py STEPS CORRUPTED [D_COEF]` where CORRUPTED lists 1-based steps
(comma-separated, 0 for none) whose batch is multiplied by 300; D_COEF scales Prodigy's
estimate d (1 by default; 10 makes its steps far too large). Prodigy's d grows from 1e-6
over the first steps, and the gradient norm jumps once around step 18 as it reaches its
size."""

from __future__ import annotations

import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "optim_vendor"))
from prodigyopt import Prodigy

steps, corrupted = int(sys.argv[1]), {int(x) for x in sys.argv[2].split(",")}
d_coef = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
torch.manual_seed(0)
X = torch.randn(512, 16)
y = (X @ torch.randn(16, 4)).argmax(1)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4))
optimizer = Prodigy(model.parameters(), lr=1.0, d_coef=d_coef)
for step in range(1, steps + 1):
    idx = torch.randint(0, 512, (64,))
    optimizer.zero_grad()
    scale = 300.0 if step in corrupted else 1.0
    F.cross_entropy(model(X[idx] * scale), y[idx]).backward()
    optimizer.step()
