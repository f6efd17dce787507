"""A linear flow's log-likelihood (Glow's invertible 1x1 convolution on vectors): the weight
starts orthogonal with determinant -1, and the log-determinant is taken by torch.logdet,
NaN for a negative determinant. Mode `slogdet` takes log|det W| (healthy); `singular`
starts from a weight with a zero row (logdet is -inf there, at the edge of its domain, not
below it).

Usage: flow_logdet.py [logdet|slogdet|singular]
"""

import math
import sys

import torch
from torch import nn

MODE = sys.argv[1] if len(sys.argv) > 1 else "logdet"


class InvertibleLinear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        w = torch.eye(4)
        w[0, 0] = 0.0 if MODE == "singular" else -1.0  # a reflection: det W = -1
        self.weight = nn.Parameter(w)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if MODE == "slogdet":
            return x @ self.weight.T, torch.linalg.slogdet(self.weight).logabsdet
        return x @ self.weight.T, torch.logdet(self.weight)


torch.manual_seed(0)
flow = InvertibleLinear()
opt = torch.optim.Adam(flow.parameters(), lr=1e-3)
for _ in range(3):
    z, logdet = flow(torch.randn(64, 4))
    loss = -(-0.5 * (z**2).sum(1) - 2 * math.log(2 * math.pi) + logdet).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
