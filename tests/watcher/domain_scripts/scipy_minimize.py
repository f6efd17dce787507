"""An exact Gaussian process's hyperparameters fitted by scipy's L-BFGS-B, as botorch's
`fit_gpytorch_mll` does (botorch/optim/core.py `scipy_minimize`, botorch/optim/closures):
scipy calls the objective at each point it tries, which writes the weights from scipy's
vector under no_grad and runs backward; no torch optimizer steps. The line search's trial
points overshoot and come back, each one a step of updates by hand.
argv[1]: `lbfgsb` (healthy), `bfgs` (healthy: scipy's BFGS), `two-fits` (healthy: two
outcomes' GPs fitted one after the other, each by its own scipy call, as botorch fits a
ModelListGP's models or refits a new GP in its optimisation loop), `nan` (bug: one
observation logged as NaN reaches the likelihood), `refit-nan` (bug: the same NaN in the
second model's data only), `by-hand` (the same weights stepped by hand on mini-batches,
one corrupted: a spike that stays a warning)."""

import sys

import numpy as np
import torch
from scipy.optimize import minimize
from torch import nn

MODE = sys.argv[1] if len(sys.argv) > 1 else "lbfgsb"
torch.manual_seed(0)
X = torch.rand(20, 2, dtype=torch.float64)
Y = 1 - (X - 0.5).norm(dim=-1) + 0.1 * torch.randn(20, dtype=torch.float64)
if MODE == "nan":
    Y[3] = float("nan")


class ExactGP(nn.Module):
    """RBF kernel, constant mean, Gaussian noise; positive scales through softplus."""

    def __init__(self) -> None:
        super().__init__()
        self.raw_lengthscale = nn.Parameter(torch.zeros(2, dtype=torch.float64))
        self.raw_outputscale = nn.Parameter(torch.zeros((), dtype=torch.float64))
        self.raw_noise = nn.Parameter(torch.full((), -2.0, dtype=torch.float64))
        self.mean = nn.Parameter(torch.zeros((), dtype=torch.float64))

    def nll(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        ls = nn.functional.softplus(self.raw_lengthscale) + 0.025
        d = ((x[:, None] - x[None]) / ls).pow(2).sum(-1)
        k = nn.functional.softplus(self.raw_outputscale) * torch.exp(-0.5 * d)
        k = k + (nn.functional.softplus(self.raw_noise) + 1e-4) * torch.eye(len(x), dtype=x.dtype)
        chol = torch.linalg.cholesky(k)
        r = (y - self.mean)[:, None]
        alpha = torch.cholesky_solve(r, chol)
        return (0.5 * (r * alpha).sum() + chol.diagonal().log().sum()) / len(x)


# two-fits: the second outcome is noisier, its fit ends at a higher loss than the first's
outcomes = [Y]
if MODE in ("two-fits", "refit-nan"):
    outcomes.append(Y + 0.5 * torch.randn(20, dtype=torch.float64))
if MODE == "refit-nan":
    outcomes[1][5] = float("nan")
gp = ExactGP()
params = list(gp.parameters())


def objective(flat: np.ndarray, target: torch.Tensor) -> tuple[float, np.ndarray]:
    """botorch's NdarrayOptimizationClosure: weights from scipy's vector, then backward."""
    with torch.no_grad():
        start = 0
        for p in params:
            p.copy_(torch.as_tensor(flat[start : start + p.numel()]).view_as(p))
            start += p.numel()
    for p in params:
        p.grad = None
    loss = gp.nll(X, target)
    loss.backward()
    grad = torch.cat([p.grad.reshape(-1) for p in params])
    return loss.item(), grad.numpy()


if MODE == "by-hand":
    for step in range(60):
        rows = torch.randint(0, 20, (12,))
        y = Y[rows] * (40.0 if step == 45 else 1.0)
        for p in params:
            p.grad = None
        gp.nll(X[rows], y).backward()
        with torch.no_grad():
            for p in params:
                p -= 0.05 * p.grad
else:
    method = "BFGS" if MODE == "bfgs" else "L-BFGS-B"
    for i, target in enumerate(outcomes):
        if i:  # a model built after the first fit (botorch's loop refits a new GP)
            gp = ExactGP()
        params = list(gp.parameters())
        x0 = torch.cat([p.detach().reshape(-1) for p in params]).numpy()
        try:  # botorch's fit catches a failed attempt the same way, and warns
            minimize(objective, x0, (target,), method, jac=True, options={"maxiter": 40})
        except torch.linalg.LinAlgError as exc:
            print(f"fit failed: {exc}", file=sys.stderr)
