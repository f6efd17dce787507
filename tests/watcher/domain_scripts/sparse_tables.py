"""DLRM as facebookresearch/dlrm writes it: nn.EmbeddingBag(mode="sum", sparse=True) tables
stepped by SparseAdam, the bottom and top MLPs by Adam (two optimizers), dot interactions,
click labels from a power-law id popularity. Mode `healthy`; bug `missing` (the tables left
out: only the dense optimizer is built)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

mode = sys.argv[1] if len(sys.argv) > 1 else "healthy"
torch.manual_seed(0)
SIZES, D, B = [500, 40, 2000], 8, 64


class DLRM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb_l = nn.ModuleList(nn.EmbeddingBag(n, D, mode="sum", sparse=True) for n in SIZES)
        self.bot_l = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, D), nn.ReLU())
        pairs = (len(SIZES) + 1) * len(SIZES) // 2
        self.top_l = nn.Sequential(nn.Linear(D + pairs, 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, dense, offsets, indices):
        x = self.bot_l(dense)
        ly = [e(i, o) for e, i, o in zip(self.emb_l, indices, offsets, strict=True)]
        t = torch.stack([x, *ly], dim=1)
        z = torch.bmm(t, t.transpose(1, 2))
        li, lj = torch.tril_indices(t.shape[1], t.shape[1], offset=-1)
        return self.top_l(torch.cat([x, z[:, li, lj]], dim=1)).squeeze(-1)


m = DLRM()
weights = [torch.randn(n) for n in SIZES]
tables = [p for e in m.emb_l for p in e.parameters()]
mlps = [*m.bot_l.parameters(), *m.top_l.parameters()]
opts = [torch.optim.Adam(mlps, lr=1e-3)]
if mode != "missing":
    opts.insert(0, torch.optim.SparseAdam(tables, lr=1e-2))
for _step in range(12):
    dense = torch.rand(B, 4)
    indices, offsets, logit = [], [], dense[:, 0] - 0.5
    for n, w in zip(SIZES, weights, strict=True):
        p = 1.0 / torch.arange(1, n + 1).float()
        idx = torch.multinomial(p, B * 2, replacement=True)
        indices.append(idx)
        offsets.append(torch.arange(0, B * 2, 2))
        logit = logit + w[idx].view(B, 2).sum(1) * 0.5
    y = (torch.rand(B) < torch.sigmoid(logit)).float()
    loss = F.binary_cross_entropy_with_logits(m(dense, offsets, indices), y)
    for o in opts:
        o.zero_grad()
    loss.backward()
    for o in opts:
        o.step()
