"""DARTS (Liu et al. 2019), first order: mixed operations weighted by a softmax over the
architecture weights alpha (started near 0, 1e-3 * randn, for a uniform choice), alpha in
its own Adam on validation batches, the network's weights in SGD on training batches.
Modes: `darts` (healthy, alpha's Adam at 3e-3); bugs `w-adam` (the weights moved to Adam
at 0.2, SGD's sort of lr, far above their initial rms) and `alpha-in-w` (the weights' SGD
built on model.parameters(): alpha stepped by both optimizers)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "darts"
D = 8


class Zero(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 0.0


class MixedOp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ops = nn.ModuleList(
            [nn.Identity(), nn.Sequential(nn.Linear(D, D), nn.ReLU()), nn.Linear(D, D), Zero()]
        )

    def forward(self, x: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        return sum(w * op(x) for w, op in zip(weights, self.ops, strict=True))


class Network(nn.Module):
    def __init__(self, edges: int = 2) -> None:
        super().__init__()
        self.stem = nn.Linear(4, D)
        self.edges = nn.ModuleList(MixedOp() for _ in range(edges))
        self.head = nn.Linear(D, 3)
        self.alphas = nn.Parameter(1e-3 * torch.randn(edges, 4))

    def weights(self) -> list[nn.Parameter]:
        return [p for name, p in self.named_parameters() if name != "alphas"]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.stem(x)
        for edge, alpha in zip(self.edges, self.alphas, strict=True):
            h = edge(h, F.softmax(alpha, dim=-1))
        return self.head(h)


W = torch.randn(4, 3)


def batch(n: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(n, 4)
    return x, (torch.tanh(x) @ W).argmax(1)


net = Network()
if MODE == "w-adam":
    w_opt: torch.optim.Optimizer = torch.optim.Adam(net.weights(), lr=0.2)
else:  # bug alpha-in-w: the weights' SGD built on model.parameters(), alpha included
    trained = net.parameters() if MODE == "alpha-in-w" else net.weights()
    w_opt = torch.optim.SGD(trained, lr=0.05, momentum=0.9, weight_decay=3e-4)
a_opt = torch.optim.Adam([net.alphas], lr=3e-3, betas=(0.5, 0.999), weight_decay=1e-3)
for _step in range(40):
    xv, yv = batch()
    a_opt.zero_grad()
    F.cross_entropy(net(xv), yv).backward()
    a_opt.step()
    xt, yt = batch()
    w_opt.zero_grad()
    loss = F.cross_entropy(net(xt), yt)
    loss.backward()
    nn.utils.clip_grad_norm_(net.weights(), 5.0)
    w_opt.step()
print("final", loss.item(), F.softmax(net.alphas, -1).argmax(-1).tolist())
