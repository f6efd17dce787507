# SAM (Foret et al. 2021) as the widely used davda54/sam wrapper: the first backward's gradients
# move the weights to w + e(w) in place, zero_grad, a second backward there, the weights put
# back and the base optimizer steps. Healthy: the first gradients are used, not wiped.
# ARGS: BASE(sgd|adam) [STEPS]
import sys

import torch
import torch.nn.functional as F
from torch import nn


class SAM(torch.optim.Optimizer):
    def __init__(self, params, base_optimizer, rho=0.05, **kwargs):
        super().__init__(params, dict(rho=rho, **kwargs))
        self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
        self.param_groups = self.base_optimizer.param_groups

    @torch.no_grad()
    def first_step(self, zero_grad=False):
        grads = [p.grad for g in self.param_groups for p in g["params"] if p.grad is not None]
        grad_norm = torch.norm(torch.stack([g.norm() for g in grads]))
        for group in self.param_groups:
            scale = group["rho"] / (grad_norm + 1e-12)
            for p in group["params"]:
                if p.grad is None:
                    continue
                self.state[p]["old_p"] = p.data.clone()
                p.add_(p.grad * scale.to(p))  # climb to the local maximum w + e(w)
        if zero_grad:
            self.zero_grad()

    @torch.no_grad()
    def second_step(self, zero_grad=False):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.data = self.state[p]["old_p"]  # back to w
        self.base_optimizer.step()
        if zero_grad:
            self.zero_grad()


base = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 40
torch.manual_seed(0)
D, C = 20, 5
W = torch.randn(D, C)
model = nn.Sequential(nn.Linear(D, 64), nn.ReLU(), nn.Linear(64, C))
if base == "sgd":
    opt = SAM(model.parameters(), torch.optim.SGD, lr=0.05, momentum=0.9)
else:
    opt = SAM(model.parameters(), torch.optim.Adam, lr=1e-3)
for _ in range(steps):
    x = torch.randn(64, D)
    y = (x @ W).argmax(1)
    F.cross_entropy(model(x), y).backward()
    opt.first_step(zero_grad=True)
    F.cross_entropy(model(x), y).backward()
    opt.second_step(zero_grad=True)
