# Every dtype. float64: a whole float64 model (Adam, clip); mixed: float64, bfloat16,
# float16, complex64 and float32 parameters in one model; huge: float32 gradients of
# ~1e19 per element (a finite norm of ~1e20 whose float32 square overflows); inf_clip:
# clip_grad_norm_(norm_type=inf) that binds at every step.
import argparse

import step_oracle as oracle
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--case", required=True)
parser.add_argument("--out", required=True)
args = parser.parse_args()
torch.manual_seed(0)
case = args.case


class Mixed(nn.Module):
    def __init__(self):
        super().__init__()
        self.f64 = nn.Linear(4, 3).double()
        self.bf16 = nn.Linear(4, 3).bfloat16()
        self.f16 = nn.Parameter(torch.randn(3).half())
        self.c64 = nn.Parameter(torch.randn(4, 3, dtype=torch.complex64))
        self.f32 = nn.Linear(4, 3)

    def forward(self, x):
        y = self.f64(x.double()).float() + self.bf16(x.bfloat16()).float()
        y = y + self.f16.float() + (x.to(torch.complex64) @ self.c64).abs() + self.f32(x)
        return y


class Huge(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(100))
        self.b = nn.Parameter(torch.ones(3))

    def forward(self, x):
        return (self.w * 1e19).sum() * x.mean() + self.b.sum()


if case == "float64":
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)).double()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
elif case == "mixed":
    model = Mixed()
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
elif case == "huge":
    model = Huge()
    opt = torch.optim.SGD(model.parameters(), lr=1e-40)
else:
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
named = list(model.named_parameters())
seen = []
for _step in range(5):
    x = torch.rand(6, 4) + 0.5
    if case == "float64":
        x = x.double()
    loss = model(x).pow(2).mean() if case != "huge" else model(x)
    opt.zero_grad()
    loss.backward()
    norms = oracle.grads(named)
    clip = clipped = None
    if case in ("float64", "inf_clip"):
        norm_type = float("inf") if case == "inf_clip" else 2.0
        clip = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e-3, norm_type).item()
        clipped = oracle.total(oracle.grads(named).values())
    before = oracle.weights(named)
    opt.step()
    seen.append(
        {
            "loss": loss.item(),
            "params": norms,
            "grad_norm": oracle.total(norms.values()),
            "update": oracle.update(before, named),
            "clip": clip,
            "clipped": clipped,
        }
    )
oracle.dump(args.out, seen)
