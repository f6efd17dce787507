"""A binarised network (BinaryConnect / BNN): weights and activations through sign() in the
forward, a straight-through estimator in the backward, the latent weights clipped to
[-1, 1] after each step; a 4-bit quantiser that rounds the same way.

argv: `ste` (a custom Function: the gradient passed on where |x| <= 1), `detach`
(x + (sign(x) - x).detach(), rounding the same way); bugs `sign` (plain torch.sign: its
derivative is 0), `round` (the quantiser's plain round), `blocked` (a custom Function whose
backward returns zeros).
"""

import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "ste"


class SignSTE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sign()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        if MODE == "blocked":
            return grad * 0
        return grad * (x.abs() <= 1).to(grad.dtype)


def binarize(x):
    if MODE == "sign":
        return torch.sign(x)
    if MODE in ("detach", "round"):
        return x + (torch.sign(x) - x).detach()
    return SignSTE.apply(x)


def quantize(x):
    """4 bits on [0, 1]."""
    scaled = x.clamp(0, 1) * 15
    if MODE == "round":
        return scaled.round() / 15
    return (scaled + (scaled.round() - scaled).detach()) / 15


class BinLinear(nn.Linear):
    def forward(self, x):
        return F.linear(x, binarize(self.weight), self.bias)


model = nn.Sequential(
    nn.Linear(16, 32), nn.BatchNorm1d(32), nn.Hardtanh(), BinLinear(32, 32), nn.BatchNorm1d(32)
)
head = nn.Linear(32, 4)
opt = torch.optim.Adam([*model.parameters(), *head.parameters()], lr=5e-3)
proto = torch.randn(4, 16)
for _ in range(30):
    y = torch.randint(0, 4, (32,))
    x = proto[y] + 0.5 * torch.randn(32, 16)
    loss = F.cross_entropy(head(quantize(torch.sigmoid(model(x)))), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():
        model[3].weight.clamp_(-1, 1)
print("final", loss.item())
