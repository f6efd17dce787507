"""A masked-token model (BERT's objective, a tiny MLP over the neighbours): 15% of the
tokens masked, labels -100 everywhere else. MODE typo: from step 30 the masking rate is
0.0015 (a typo for 0.15), so most batches have no masked token: cross_entropy's mean over
no targets is 0/0, a NaN loss with exactly zero gradients."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

mode = sys.argv[1] if len(sys.argv) > 1 else "healthy"
torch.manual_seed(0)
V, L, MASK, D = 32, 12, 0, 32
model = nn.Sequential(nn.Embedding(V, D), nn.Flatten(), nn.Linear(L * D, 64), nn.GELU())
head = nn.Linear(64, L * V)
opt = torch.optim.AdamW([*model.parameters(), *head.parameters()], lr=3e-3)
for step in range(60):
    ids = (torch.randint(1, V, (16, 1)) + torch.arange(L)) % (V - 1) + 1
    rate = 0.0015 if mode == "typo" and step >= 30 else 0.15
    masked = torch.rand(ids.shape) < rate
    labels = ids.masked_fill(~masked, -100)
    logits = head(model(ids.masked_fill(masked, MASK))).view(16, L, V)
    loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("loss", loss.item())
