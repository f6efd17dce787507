"""LBFGS fits classifiers full-batch, as scikit-learn's logistic regression and influence-
function code do: the loss converges within the first step (up to max_iter iterations) to a
floor above 0 (the labels' noise), where the gradients vanish by design. argv[1]:
`logistic` (binary, L2-regularised, lr=0.5, no line search), `softmax` (multinomial,
lr=1, torch's defaults), `wolfe` (a small MLP classifier, line_search_fn="strong_wolfe"),
`dead` (bug: the MLP of ReLUs at lr=3 without a line search: its steps overshoot,
the loss leaps to 1e7 and stays, with 99.6% of the ReLUs dead)."""

import sys

import torch
from torch import nn
from torch.nn import functional as F

MODE = sys.argv[1] if len(sys.argv) > 1 else "logistic"
torch.manual_seed(0)
X = torch.randn(400, 12)
W = torch.randn(12, 3)
noisy = X @ W + 0.8 * torch.randn(400, 3)
if MODE == "logistic":
    model = nn.Linear(12, 1)
    Y = (noisy[:, 0] > 0).float()
else:
    hidden = 32 if MODE in ("wolfe", "dead") else 0
    layers = (
        [nn.Linear(12, hidden), nn.ReLU(), nn.Linear(hidden, 3)] if hidden else [nn.Linear(12, 3)]
    )
    model = nn.Sequential(*layers)
    Y = noisy.argmax(1)
lr = {"logistic": 0.5, "dead": 3.0}.get(MODE, 1.0)
search = "strong_wolfe" if MODE == "wolfe" else None
opt = torch.optim.LBFGS(model.parameters(), lr=lr, max_iter=20, line_search_fn=search)


def closure():
    opt.zero_grad()
    out = model(X)
    if MODE == "logistic":
        loss = F.binary_cross_entropy_with_logits(out.squeeze(-1), Y)
        loss = loss + 1e-3 * model.weight.pow(2).sum()
    else:
        loss = F.cross_entropy(out, Y)
    loss.backward()
    return loss


for _ in range(12):
    opt.step(closure)
