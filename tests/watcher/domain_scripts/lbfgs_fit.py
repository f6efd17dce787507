"""LBFGS on a small full-batch regression: the closure runs backward many times a step.
argv[1]: `wolfe` (lr=1, line_search_fn="strong_wolfe"), `plain` (lr=1, torch's defaults),
`high` (bug: lr=5 and no line search: the step overshoots to NaN)."""

import sys

import torch
from torch import nn

MODE = sys.argv[1] if len(sys.argv) > 1 else "wolfe"
torch.manual_seed(0)
X = torch.randn(256, 8)
Y = torch.tanh(X @ torch.randn(8, 1)) + 0.01 * torch.randn(256, 1)
model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))
search = "strong_wolfe" if MODE == "wolfe" else None
opt = torch.optim.LBFGS(
    model.parameters(), lr=5 if MODE == "high" else 1, max_iter=10, line_search_fn=search
)


def closure():
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(X), Y)
    loss.backward()
    return loss


for _ in range(12):
    opt.step(closure)
