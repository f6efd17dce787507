"""A denoising diffusion model (DDPM, Ho et al. 2020, Algorithm 1) on 2-D points, laid out as
the small public ones are: a beta schedule over 50 timesteps, an MLP that takes the noisy
point and a sinusoidal embedding of t (through a learned projection) and predicts the noise,
AdamW at lr 1e-3 with the gradient clipped at 1. By default a linear schedule and the MSE
against the noise; --min-snr: the cosine schedule (betas clipped at 0.999, Nichol & Dhariwal
2021) and the loss weighted by min(SNR, 5) / SNR (Hang et al. 2023).

Bugs: --detach-time detaches the time embedding after its projection (the model never learns
t: the projection gets no gradient); --no-beta-clip leaves the cosine schedule's last beta at
1, so alphas_cumprod reaches 0 there and the min-SNR weight of a sample at the last timestep
is 0 / 0.
"""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=300)
parser.add_argument("--detach-time", action="store_true")
parser.add_argument("--min-snr", action="store_true")
parser.add_argument("--no-beta-clip", action="store_true")
args = parser.parse_args()
torch.manual_seed(0)

T = 50


def cosine_betas(steps: int, s: float = 0.008) -> torch.Tensor:
    f = torch.cos((torch.arange(steps + 1) / steps + s) / (1 + s) * math.pi / 2) ** 2
    betas = 1 - f[1:] / f[:-1]
    return betas if args.no_beta_clip else betas.clamp(max=0.999)


betas = cosine_betas(T) if args.min_snr or args.no_beta_clip else torch.linspace(1e-4, 0.02, T)
alphas_cumprod = torch.cumprod(1.0 - betas, dim=0)


def moons(n: int) -> torch.Tensor:
    """Two interleaved half circles with a little noise, scaled to about unit variance."""
    a = torch.rand(n) * math.pi
    upper = torch.rand(n) < 0.5
    x = torch.where(upper, torch.cos(a), 1 - torch.cos(a))
    y = torch.where(upper, torch.sin(a), 0.5 - torch.sin(a))
    return (torch.stack([x, y], 1) - torch.tensor([0.5, 0.25])) * 2 + 0.05 * torch.randn(n, 2)


def sinusoidal(t: torch.Tensor, size: int = 32) -> torch.Tensor:
    half = size // 2
    freq = torch.exp(-math.log(10000.0) * torch.arange(half) / half)
    angle = t.float()[:, None] * freq[None]
    return torch.cat([angle.sin(), angle.cos()], -1)


class Block(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.ff = nn.Linear(width, width)

    def forward(self, x):
        return x + F.gelu(self.ff(x))


class Denoiser(nn.Module):
    def __init__(self, width: int = 64):
        super().__init__()
        self.time = nn.Sequential(nn.Linear(32, width), nn.GELU())
        self.inp = nn.Linear(2, width)
        self.blocks = nn.Sequential(Block(width), Block(width), Block(width))
        self.out = nn.Linear(width, 2)

    def forward(self, x, t):
        emb = self.time(sinusoidal(t))
        if args.detach_time:
            emb = emb.detach()
        return self.out(self.blocks(self.inp(x) + emb))


data = moons(4000)
model = Denoiser()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(args.steps):
    x0 = data[torch.randint(len(data), (64,))]
    noise = torch.randn_like(x0)
    t = torch.randint(0, T, (64,))
    ab = alphas_cumprod[t][:, None]
    noisy = ab.sqrt() * x0 + (1 - ab).sqrt() * noise
    pred = model(noisy, t)
    if args.min_snr or args.no_beta_clip:
        snr = ab / (1 - ab)
        weight = snr.clamp(max=5.0) / snr
        loss = (weight * (pred - noise) ** 2).mean()
    else:
        loss = F.mse_loss(pred, noise)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad()
    if step % 100 == 0:
        print(f"step {step}: loss {loss.item():.4f}")
