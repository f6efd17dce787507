"""Learned image compression (Ballé et al. 2018, CompressAI's factorized prior): a conv
encoder, a quantiser, a per-channel density whose likelihoods are bounded below by a custom
Function (LowerBound: the gradient passes where it would raise the value), a decoder; the
loss lambda * 255^2 * MSE + bpp, Adam with the gradient clipped at 1.0.

argv: `noise` (uniform noise stands in for rounding in training), `ste` (rounding with a
straight-through estimator); bug `round` (a plain torch.round in training: every encoder
weight gets exact zeros).
"""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "noise"


class LowerBound(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, bound):
        ctx.save_for_backward(x, bound)
        return torch.max(x, bound)

    @staticmethod
    def backward(ctx, grad):
        x, bound = ctx.saved_tensors
        return ((x >= bound) | (grad < 0)) * grad, None


def quantize(y):
    if MODE == "noise":
        return y + torch.empty_like(y).uniform_(-0.5, 0.5)
    if MODE == "ste":
        return y + (torch.round(y) - y).detach()
    return torch.round(y)


class Codec(nn.Module):
    def __init__(self, channels=6):
        super().__init__()
        self.encode = nn.Sequential(
            nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU(), nn.Conv2d(8, channels, 3, 2, 1)
        )
        self.decode = nn.Sequential(
            nn.ConvTranspose2d(channels, 8, 4, 2, 1), nn.ReLU(), nn.ConvTranspose2d(8, 3, 4, 2, 1)
        )
        self.log_scale = nn.Parameter(torch.zeros(1, channels, 1, 1))
        self.register_buffer("bound", torch.tensor(1e-9))

    def forward(self, x):
        y_hat = quantize(self.encode(x) * 4)
        scale = self.log_scale.exp()
        upper = torch.sigmoid((y_hat + 0.5) / scale)
        lower = torch.sigmoid((y_hat - 0.5) / scale)
        return self.decode(y_hat / 4), LowerBound.apply(upper - lower, self.bound)


codec = Codec()
opt = torch.optim.Adam(codec.parameters(), lr=1e-3)
images = F.interpolate(torch.rand(64, 3, 4, 4), size=16, mode="bilinear").clamp(0, 1)
for _ in range(24):
    x = images[torch.randint(0, 64, (8,))]
    x_hat, likelihoods = codec(x)
    bpp = torch.log(likelihoods).sum() / (-math.log(2) * x.numel() / 3)
    loss = 0.01 * 255**2 * F.mse_loss(x_hat, x) + bpp
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(codec.parameters(), 1.0)
    opt.step()
print("final", loss.item())
