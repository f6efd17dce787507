"""IRMv1 (Arjovsky et al. 2019): two environments whose spurious feature's correlation
differs; the penalty is the squared gradient of each environment's risk with respect to a
dummy classifier scale (torch.autograd.grad, create_graph=True), the scale made once and
kept outside the optimizer, the penalty weight raised after a warm-up and the loss divided
by it. Modes: `irm` (healthy); `head` (the bug: the optimizer built on the first layer only,
so the classifier head gets gradients no step applies)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "irm"


def environment(n: int, p_spurious: float) -> tuple[torch.Tensor, torch.Tensor]:
    y = (torch.rand(n) < 0.5).float()
    core = y + 0.7 * torch.randn(n)
    spurious = torch.where(torch.rand(n) < p_spurious, y, 1 - y) + 0.1 * torch.randn(n)
    return torch.stack([core, spurious], 1), y


envs = [environment(64, 0.9), environment(64, 0.8)]
mlp = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 1))
scale = torch.tensor(1.0, requires_grad=True)
trained = mlp[0].parameters() if MODE == "head" else mlp.parameters()
opt = torch.optim.Adam(trained, lr=1e-2)


def penalty(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    risk = F.binary_cross_entropy_with_logits(logits * scale, y)
    (grad,) = torch.autograd.grad(risk, [scale], create_graph=True)
    return grad.pow(2)


for step in range(30):
    nll = pen = torch.zeros(())
    for x, y in envs:
        logits = mlp(x).squeeze(-1)
        nll = nll + F.binary_cross_entropy_with_logits(logits, y) / len(envs)
        pen = pen + penalty(logits, y) / len(envs)
    weight = 1.0 if step < 10 else 100.0
    loss = (nll + weight * pen) / weight
    opt.zero_grad()
    loss.backward()
    opt.step()
print("final", nll.item(), pen.item())
