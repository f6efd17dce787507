"""Super-resolution (ESPCN-style: convolutions on the low-resolution image, then a pixel
shuffle) trained with L1 plus a perceptual loss through a fixed convolutional feature
extractor, frozen with requires_grad_(False). Modes: `frozen` (healthy); bug `unfrozen`,
the extractor left requiring grad and in no optimizer (its gradients pile up, and the loss
must still differentiate through it: no_grad around it would cut the model's gradient)."""

import sys

import torch
from torch import nn
from torch.nn import functional as F

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "frozen"


class ESPCN(nn.Module):
    def __init__(self, scale=2):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 16, 5, padding=2), nn.Tanh(), nn.Conv2d(16, 3 * scale**2, 3, padding=1)
        )
        self.shuffle = nn.PixelShuffle(scale)

    def forward(self, x):
        return self.shuffle(self.body(x))


class Features(nn.Module):
    def __init__(self):
        super().__init__()
        self.convs = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1)
        )

    def forward(self, x):
        return self.convs(x)


net, features = ESPCN(), Features().eval()
if MODE == "frozen":
    features.requires_grad_(False)
opt = torch.optim.Adam(net.parameters(), lr=2e-3)
x = torch.linspace(0, 1, 16)
for _ in range(25):
    f = torch.rand(8, 3, 1, 1) * 8 + 2
    hr = 0.5 + 0.5 * torch.sin(f * x[:, None] + torch.rand(8, 3, 1, 1) * 6) * torch.cos(f * x)
    sr = net(F.avg_pool2d(hr, 2))
    loss = F.l1_loss(sr, hr) + 0.1 * F.mse_loss(features(sr), features(hr))
    opt.zero_grad()
    loss.backward()
    opt.step()
