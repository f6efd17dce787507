"""Losses on a derivative of the model's output: a Hamiltonian neural network (Greydanus et
al. 2019: the time derivatives of a learned H(q, p) by autograd.grad with create_graph) and
a machine-learned force field (forces = -dE/dpositions, loss = energy MSE + 100 x force
MSE), and a Lagrangian neural network (Cranmer et al. 2020: accelerations from the learned
L(q, q')'s Hessian, torch.func's jacfwd over grad, vmapped, the model by functional_call).
A force-matching fit (`forces-only`: the loss on the forces alone, as coarse-grained force
matching does) of an energy with a trained per-species shift, whose SiLU network's derivative
formulas record no node named as a backward's. Modes: `hnn`, `forces`, `lnn`,
`forces-only`; bugs `hnn-aux` (an auxiliary head in the optimizer whose output the loss never
reads), `detached-bias` (a first-order energy fit whose output bias is added detached) and
`detached-branch` (forces only; an environment term of the energy fed the distances
detached: its network never learns)."""

import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, grad, jacfwd, vmap

MODE = sys.argv[1] if len(sys.argv) > 1 else "hnn"
STEPS = int(sys.argv[2]) if len(sys.argv) > 2 else 30
torch.manual_seed(0)


class Hamiltonian(nn.Module):
    def __init__(self, aux: bool = False):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 1))
        self.aux = nn.Linear(32, 1) if aux else None

    def forward(self, x):
        return self.net(x)


POINTS = torch.randn(256, 2)  # (q, p) of a spring, H = (q² + p²) / 2: one full batch


def hnn_loss(model):
    x = POINTS.clone().requires_grad_(True)
    dx_true = torch.stack([x[:, 1], -x[:, 0]], 1).detach()
    dh = torch.autograd.grad(model(x).sum(), x, create_graph=True)[0]
    return F.mse_loss(torch.stack([dh[:, 1], -dh[:, 0]], 1), dx_true)


def lnn_loss(model):
    def lagrangian(params, x):
        return functional_call(model, params, (x,)).squeeze()

    def acceleration(params, x):  # a pendulum's (θ, θ'): θ'' = -sin θ
        g = grad(lagrangian, argnums=1)(params, x)
        h = jacfwd(grad(lagrangian, argnums=1), argnums=1)(params, x)
        return (g[0] - h[1, 0] * x[1]) / h[1, 1]

    x = POINTS
    pred = vmap(acceleration, in_dims=(None, 0))(dict(model.named_parameters()), x)
    return F.mse_loss(pred, -torch.sin(x[:, 0]))


class Energy(nn.Module):
    """A pair potential summed over the atoms' pairs."""

    def __init__(self, n: int = 4, detached_bias: bool = False, branch: bool = False):
        super().__init__()
        self.pair = nn.Sequential(nn.Linear(1, 16), nn.SiLU(), nn.Linear(16, 1))
        self.off_diagonal = 1 - torch.eye(n)
        self.detached_bias = detached_bias
        self.species = torch.arange(n) % 2
        self.shift = nn.Parameter(torch.zeros(2))  # per species, trained
        self.env = nn.Sequential(nn.Linear(1, 8), nn.SiLU(), nn.Linear(8, 1)) if branch else None

    def forward(self, pos):
        d = (pos[:, :, None] - pos[:, None] + 1e-9).norm(dim=-1, keepdim=True)
        if self.detached_bias:
            head = self.pair[2]
            e = F.linear(self.pair[1](self.pair[0](d)), head.weight, head.bias.detach())
        else:
            e = self.pair(d)
        energy = 0.5 * (e.squeeze(-1) * self.off_diagonal).sum((1, 2))
        if self.env is not None:
            energy = energy + self.env(d.detach()).squeeze(-1).mean((1, 2))
        return energy + self.shift[self.species].sum()


def true_energy(pos):  # springs of rest length 1 between every pair
    n = pos.shape[1]
    d = (pos[:, :, None] - pos[:, None]).norm(dim=-1) + torch.eye(n)
    return 0.5 * ((d - 1).pow(2) * (1 - torch.eye(n))).sum((1, 2))


def force_loss(model, forces: bool, energy: bool = True):
    pos = (torch.randn(8, 4, 3) * 0.7).requires_grad_(True)
    e_ref = true_energy(pos)
    loss = F.mse_loss(model(pos), e_ref.detach()) if energy else 0.0
    if forces:
        f_ref = -torch.autograd.grad(e_ref.sum(), pos)[0]
        f = -torch.autograd.grad(model(pos).sum(), pos, create_graph=True)[0]
        loss = loss + 100 * F.mse_loss(f, f_ref)
    return loss


if MODE == "lnn":
    model = nn.Sequential(
        nn.Linear(2, 64), nn.Softplus(), nn.Linear(64, 64), nn.Softplus(), nn.Linear(64, 1)
    )
    step_loss = lnn_loss
elif MODE.startswith("hnn"):
    model = Hamiltonian(aux=MODE == "hnn-aux")
    step_loss = hnn_loss
elif MODE in ("forces-only", "detached-branch"):
    model = Energy(branch=MODE == "detached-branch")
    step_loss = lambda m: force_loss(m, forces=True, energy=False)  # noqa: E731
else:
    model = Energy(detached_bias=MODE == "detached-bias")
    step_loss = lambda m: force_loss(m, forces=MODE == "forces")  # noqa: E731
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
for _ in range(STEPS):
    loss = step_loss(model)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"final loss {loss.item():.4g}")
