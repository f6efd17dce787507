# Two optimizers stepping on one backward call: Muon on the hidden matrices and AdamW on the
# rest (its stock weight_decay 0.1, decoupled), or SparseAdam on sparse embeddings and Adam on
# the dense layers. Each step applies that backward's gradients, so each has its loss.
# ARGS: MODE(muon|sparse) [STEPS] [MICRO-BATCHES]
import sys

import torch
import torch.nn.functional as F
from torch import nn

mode = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 30
micro = int(sys.argv[3]) if len(sys.argv) > 3 else 1
torch.manual_seed(0)
V, D = 16, 32
emb = nn.Embedding(V, D, sparse=mode == "sparse")
body = nn.Sequential(nn.Linear(D, 64), nn.GELU(), nn.Linear(64, D))
head = nn.Linear(D, V)
if mode == "muon":
    hidden = list(body.parameters())[0::2]  # the two weight matrices
    rest = [*emb.parameters(), *list(body.parameters())[1::2], *head.parameters()]
    opts = [torch.optim.Muon(hidden, lr=0.02), torch.optim.AdamW(rest, lr=3e-3)]
else:
    dense = [*body.parameters(), *head.parameters()]
    opts = [torch.optim.SparseAdam(emb.parameters(), lr=1e-2), torch.optim.Adam(dense, lr=1e-3)]
for _ in range(steps):
    for o in opts:
        o.zero_grad()
    for _ in range(micro):
        x = torch.randint(0, V, (64,))
        h = emb(x)
        loss = F.cross_entropy(head(h + body(h)), (x + 1) % V)
        (loss / micro).backward()
    for o in opts:
        o.step()
