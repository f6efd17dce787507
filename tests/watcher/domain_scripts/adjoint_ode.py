"""A neural ODE trained through the adjoint method, as torchdiffeq's odeint_adjoint computes
it: a custom autograd.Function integrates the func under no_grad in its forward and, in its
backward, integrates the adjoint state back in time, rerunning the func with gradients on to
take vector-Jacobian products for the parameters handed to it (explicit Euler, fixed steps).
Healthy; bug `params` (one parameter of the func left out of the parameters handed to the
Function: adjoint_params missing it)."""

import sys

import torch
import torch.nn as nn

MODE = sys.argv[1] if len(sys.argv) > 1 else "adjoint"
STEPS = int(sys.argv[2]) if len(sys.argv) > 2 else 4
H, N = 0.1, 5
torch.manual_seed(0)


class ODEFunc(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 2))
        self.gain = nn.Parameter(torch.ones(2))

    def forward(self, y):
        return self.net(y) * self.gain


class AdjointEuler(torch.autograd.Function):
    @staticmethod
    def forward(ctx, y0, func, *params):
        ys = [y0]
        for _ in range(N):
            ys.append(ys[-1] + H * func(ys[-1]))
        ctx.func, ctx.n = func, len(params)
        ctx.save_for_backward(*ys, *params)
        return ys[-1]

    @staticmethod
    def backward(ctx, a):
        saved = ctx.saved_tensors
        ys, params = saved[: N + 1], saved[N + 1 :]
        grads = [torch.zeros_like(p) for p in params]
        for y in reversed(ys[:-1]):
            with torch.enable_grad():
                y = y.detach().requires_grad_()
                f = ctx.func(y)
                vjp = torch.autograd.grad(f, (y, *params), a, allow_unused=True)
            grads = [g if v is None else g + H * v for g, v in zip(grads, vjp[1:], strict=True)]
            a = a + H * vjp[0]
        return (a, None, *grads)


func = ODEFunc()
handed = list(func.net.parameters()) if MODE == "params" else list(func.parameters())
opt = torch.optim.Adam(func.parameters(), lr=1e-2)
for _ in range(STEPS):
    y0 = torch.randn(16, 2)
    target = y0 @ torch.tensor([[0.9, -0.3], [0.3, 0.9]])
    loss = ((AdjointEuler.apply(y0, func, *handed) - target) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
