"""Dense retrieval with GradCache (Gao et al. 2021): the representations computed under
no_grad in chunks, the in-batch contrastive loss backpropagated to them (leaves), then each
chunk re-encoded with grad and `backward(rep.grad)`: several backward calls per step, the
first for the cached representations' gradient. Modes: `fixed` (a fixed temperature),
`scale` (a learnable logit scale, clamped as CLIP does, which only the first call reaches)."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "fixed"
V, D, L, B, CHUNK = 32, 8, 6, 16, 8

encoder = nn.Sequential(nn.EmbeddingBag(V, D), nn.Linear(D, D))
logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))
params = [*encoder.parameters(), *([logit_scale] if MODE == "scale" else [])]
opt = torch.optim.AdamW(params, lr=1e-3)
for _ in range(8):
    docs = torch.randint(0, V, (B, L))
    queries = docs[:, :3]
    with torch.no_grad():
        q = torch.cat([F.normalize(encoder(c), dim=-1) for c in queries.split(CHUNK)])
        p = torch.cat([F.normalize(encoder(c), dim=-1) for c in docs.split(CHUNK)])
    q.requires_grad_()
    p.requires_grad_()
    scale = logit_scale.exp().clamp(max=100) if MODE == "scale" else 20.0
    loss = F.cross_entropy(scale * q @ p.t(), torch.arange(B))
    loss.backward()
    for inputs, reps in ((queries, q), (docs, p)):
        for chunk, grad in zip(inputs.split(CHUNK), reps.grad.split(CHUNK), strict=True):
            F.normalize(encoder(chunk), dim=-1).backward(grad)
    opt.step()
    opt.zero_grad()
