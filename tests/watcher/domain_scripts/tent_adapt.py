"""Test-time adaptation by entropy minimisation (TENT, Wang et al. 2021): a classifier
trained on one domain adapts to a shifted one by training only its BatchNorms' affine
parameters (everything else requires_grad=False) on the prediction's entropy, its
BatchNorms normalising by each test batch's statistics: the model in train mode, or its
running statistics removed (track_running_stats=False, running_mean/var None), which
normalise by the batch in eval mode too.

argv: "train" (model.train(), statistics removed, as TENT's code), "eval-no-stats"
(model.eval() after the statistics are removed); bug "eval" (model.eval() with the
running statistics kept: the source domain's statistics normalise the shifted inputs).
"""

import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "train"
D, C = 16, 4
W = torch.randn(D, C)
model = nn.Sequential(nn.Linear(D, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, C))
source_opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for _ in range(30):
    x = torch.randn(64, D)
    loss = F.cross_entropy(model(x), (x @ W).argmax(1))
    source_opt.zero_grad()
    loss.backward()
    source_opt.step()

model.train()
model.requires_grad_(False)
norms = [m for m in model.modules() if isinstance(m, nn.BatchNorm1d)]
for m in norms:
    m.requires_grad_(True)
    if MODE != "eval":
        m.track_running_stats, m.running_mean, m.running_var = False, None, None
if MODE != "train":
    model.eval()
opt = torch.optim.Adam([p for m in norms for p in m.parameters()], lr=1e-3)
shift = torch.randn(D) * 0.8
for _ in range(20):
    out = model(torch.randn(64, D) * 1.5 + shift)
    entropy = -(out.softmax(1) * out.log_softmax(1)).sum(1).mean()
    opt.zero_grad()
    entropy.backward()
    opt.step()
print("final", entropy.item())
