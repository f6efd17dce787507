"""Inputs optimised beside a frozen network: feature visualisation (Lucid's image behind a
sigmoid, started at 0.01, Adam at 0.05), prompt tuning (a soft prompt registered on the
wrapper around a frozen encoder, Adam at Lester et al.'s 0.3), style transfer (the image
itself, Adam, the style's Gram matrix as a fixed target) and a universal adversarial
perturbation (Adam ascends the frozen classifier's cross-entropy over batches, projected
to its eps ball). MODE: featvis, prompt, style, uap; `head` is their look-alike that is a
bug: a Linear head beside the same frozen encoder, trained at lr 1.0 on one batch;
`nograd` (a bug) is style transfer whose image never required grad and whose network was
never frozen: the optimizer holds only the image, and no step moves it."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

MODE = sys.argv[1] if len(sys.argv) > 1 else "featvis"
STEPS = 30
torch.manual_seed(0)
D = 16


class Prompted(nn.Module):
    """A frozen encoder with a learned prompt in front of its input tokens."""

    def __init__(self, encoder: nn.Module) -> None:
        super().__init__()
        self.encoder = encoder
        self.prompt = nn.Parameter(torch.randn(4, D) * 0.02)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        prompt = self.prompt.expand(len(tokens), -1, -1)
        return self.encoder(torch.cat([prompt, tokens], 1)).mean(1)


if MODE in ("featvis", "style", "nograd"):
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1))
else:
    net = nn.Sequential(nn.Linear(D, D), nn.LayerNorm(D), nn.GELU(), nn.Linear(D, 4))
net.eval().requires_grad_(MODE == "nograd")

if MODE == "featvis":
    param = (torch.randn(1, 3, 12, 12) * 0.01).requires_grad_(True)
    opt = torch.optim.Adam([param], lr=0.05)
elif MODE in ("style", "nograd"):
    image = torch.rand(1, 3, 12, 12).requires_grad_(MODE == "style")
    opt = torch.optim.Adam([image], lr=0.02)
    with torch.no_grad():
        style = net(torch.rand(1, 3, 12, 12)).flatten(2)
        style_gram = style @ style.transpose(1, 2) / style.shape[-1]
elif MODE == "prompt":
    model = Prompted(net)
    opt = torch.optim.Adam([model.prompt], lr=0.3)
    target = torch.randn(4)
elif MODE == "uap":
    delta = torch.zeros(1, D, requires_grad=True)
    opt = torch.optim.Adam([delta], lr=0.01)
else:  # head
    head = nn.Linear(4, 4)
    opt = torch.optim.Adam(head.parameters(), lr=1.0)
    x, y = torch.randn(32, D), torch.randint(0, 4, (32,))

for _ in range(STEPS):
    opt.zero_grad()
    if MODE == "featvis":
        loss = -net(torch.sigmoid(param))[:, 2].relu().mean()
    elif MODE in ("style", "nograd"):
        features = net(image).flatten(2)
        gram = features @ features.transpose(1, 2) / features.shape[-1]
        loss = F.mse_loss(gram, style_gram)
    elif MODE == "prompt":
        loss = F.mse_loss(model(torch.randn(8, 6, D)), target.expand(8, -1))
    elif MODE == "uap":
        x = torch.randn(32, D)
        loss = -F.cross_entropy(net(x + delta), net(x).argmax(1))
    else:
        loss = F.cross_entropy(head(net(x)), y)
    loss.backward()
    opt.step()
    with torch.no_grad():
        if MODE in ("style", "nograd"):
            image.clamp_(0, 1)
        elif MODE == "uap":
            delta.clamp_(-0.5, 0.5)
