"""An in-batch contrastive ranking loss as sentence-transformers'
MultipleNegativesRankingLoss computes it: the cosine similarities of each anchor with every
positive, times a scale, under cross_entropy with the diagonal as targets. Modes: `scale`
(20, the library's default), `temperature` (divided by 0.05), `learned` (CLIP's
logit_scale.exp()); bug `one` (a scale of 1: logits in [-1, 1])."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "scale"
B, D = 16, 12
encoder = nn.Sequential(nn.Linear(D, 32), nn.ReLU(), nn.Linear(32, 16))
logit_scale = nn.Parameter(torch.tensor(2.659))  # ln(1 / 0.07)
params = [*encoder.parameters(), *([logit_scale] if MODE == "learned" else [])]
opt = torch.optim.AdamW(params, lr=1e-3)
topics = torch.randn(40, D)


def cos_sim(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.mm(F.normalize(a, p=2, dim=1), F.normalize(b, p=2, dim=1).transpose(0, 1))


for _ in range(6):
    picked = topics[torch.randperm(40)[:B]]
    anchors = encoder(picked + 0.1 * torch.randn(B, D))
    positives = encoder(picked + 0.1 * torch.randn(B, D))
    scores = cos_sim(anchors, positives)
    if MODE == "scale":
        scores = scores * 20.0
    elif MODE == "temperature":
        scores = scores / 0.05
    elif MODE == "learned":
        scores = scores * logit_scale.exp()
    else:
        scores = scores * 1.0
    loss = F.cross_entropy(scores, torch.arange(B))
    opt.zero_grad()
    loss.backward()
    opt.step()
