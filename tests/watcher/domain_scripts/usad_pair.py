"""USAD (Audibert et al. 2020): one encoder, two decoders; the first autoencoder's Adam holds
the encoder and decoder 1, the second's the encoder and decoder 2. Each loss reaches the
other's decoder through the adversarial term (decoder 2 reconstructing decoder 1's output),
and the epoch-dependent weights 1/n and 1 - 1/n shift the losses toward that game. Modes:
`healthy`; bug `whole` (the second Adam built over the whole model: it also steps decoder 1,
and the first optimizer keeps nothing of its own)."""

import sys

import torch
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "healthy"
WINDOW, LATENT = 12, 4


def decoder() -> nn.Module:
    return nn.Sequential(nn.Linear(LATENT, 8), nn.ReLU(), nn.Linear(8, WINDOW), nn.Sigmoid())


encoder = nn.Sequential(nn.Linear(WINDOW, 8), nn.ReLU(), nn.Linear(8, LATENT), nn.ReLU())
decoder1, decoder2 = decoder(), decoder()
model = nn.ModuleList([encoder, decoder1, decoder2])
opt1 = torch.optim.Adam([*encoder.parameters(), *decoder1.parameters()])
second = model.parameters() if MODE == "whole" else [*encoder.parameters(), *decoder2.parameters()]
opt2 = torch.optim.Adam(second)
t = torch.linspace(0, 30, 400)
windows = (torch.sin(t) * 0.4 + 0.5 + 0.02 * torch.randn(400)).unfold(0, WINDOW, 1)


def losses(batch: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    z = encoder(batch)
    w1, w2 = decoder1(z), decoder2(z)
    w3 = decoder2(encoder(w1))
    adversarial = torch.mean((batch - w3) ** 2)
    loss1 = torch.mean((batch - w1) ** 2) / n + (1 - 1 / n) * adversarial
    loss2 = torch.mean((batch - w2) ** 2) / n - (1 - 1 / n) * adversarial
    return loss1, loss2


for epoch in range(1, 5):
    for i in range(0, len(windows), 80):
        batch = windows[i : i + 80]
        loss1, _ = losses(batch, epoch)
        loss1.backward()
        opt1.step()
        opt1.zero_grad()
        _, loss2 = losses(batch, epoch)
        loss2.backward()
        opt2.step()
        opt2.zero_grad()
