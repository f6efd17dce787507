"""Point and quantile forecasting as DLinear, Temporal Fusion Transformer-like models and
GluonTS train them: a linear map from a seasonal series' past window to its horizon, under
Adam, with the mean absolute error (F.l1_loss) or the pinball loss over three quantiles,
written as quantile forecasters do (`torch.max((q - 1) * e, q * e)`, or GluonTS's
`2 * |(y - ŷ)(1[y ≤ ŷ] - q)|` summed over the quantiles). Modes: `mae`, `pinball`,
`gluon`; bugs `mae-negated`, `pinball-negated`, `gluon-negated` (the loss's sign flipped:
the fit is maximised)."""

import math
import sys

import torch
from torch import nn
from torch.nn import functional as F

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "mae"
PAST, HORIZON = 24, 6
QUANTILES = torch.tensor([0.1, 0.5, 0.9])


def window(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    t = torch.arange(PAST + HORIZON).float()
    phase = torch.rand(batch, 1) * 2 * math.pi
    y = torch.sin(2 * math.pi * t / 12 + phase) + 0.1 * torch.randn(batch, PAST + HORIZON)
    return y[:, :PAST], y[:, PAST:]


def pinball(pred: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    e = y.unsqueeze(-1) - pred
    if MODE.startswith("gluon"):
        below = (y.unsqueeze(-1) <= pred).float()
        return (2 * (e * (below - QUANTILES)).abs()).sum(-1).mean()
    return torch.max((QUANTILES - 1) * e, QUANTILES * e).mean()


quantile = not MODE.startswith("mae")
net = nn.Linear(PAST, HORIZON * (len(QUANTILES) if quantile else 1))
opt = torch.optim.Adam(net.parameters(), lr=1e-2)
for _ in range(30):
    x, y = window(32)
    out = net(x)
    loss = pinball(out.view(-1, HORIZON, len(QUANTILES)), y) if quantile else F.l1_loss(out, y)
    if MODE.endswith("negated"):
        loss = -loss
    opt.zero_grad()
    loss.backward()
    opt.step()
