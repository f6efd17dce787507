"""S4D as state-spaces/s4's standalone s4d.py and example.py write it: a complex diagonal A
stored as log_A_real and A_imag, C a complex parameter kept real by view_as_real, the
kernel by Vandermonde once per forward, an FFT convolution, and the SSM parameters in their
own AdamW group (lr 1e-3, no weight decay) from their `_optim` attributes. A 4-class task
on 256-step sequences, each step offset by its class.
argv: healthy; bug "noexp" (A = exp(log_A_real) + 1j * A_imag, the minus left out: the
kernel grows as exp(dt·t) along the sequence)."""

import math
import sys

import torch
from torch import nn, optim

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "healthy"
H, N, L, B, STEPS = 16, 16, 256, 8, 50


class S4DKernel(nn.Module):
    def __init__(self, dt_min=0.001, dt_max=0.1, lr=1e-3):
        super().__init__()
        log_dt = torch.rand(H) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min)
        self.C = nn.Parameter(torch.view_as_real(torch.randn(H, N // 2, dtype=torch.cfloat)))
        self.register("log_dt", log_dt, lr)
        self.register("log_A_real", torch.log(0.5 * torch.ones(H, N // 2)), lr)
        self.register("A_imag", math.pi * torch.arange(N // 2).float().repeat(H, 1), lr)

    def register(self, name, tensor, lr):
        self.register_parameter(name, nn.Parameter(tensor))
        getattr(self, name)._optim = {"weight_decay": 0.0, "lr": lr}

    def forward(self, length):
        dt = torch.exp(self.log_dt)
        C = torch.view_as_complex(self.C)
        sign = 1.0 if MODE == "noexp" else -1.0
        A = sign * torch.exp(self.log_A_real) + 1j * self.A_imag
        dtA = A * dt.unsqueeze(-1)
        K = dtA.unsqueeze(-1) * torch.arange(length)
        C = C * (torch.exp(dtA) - 1.0) / A
        return 2 * torch.einsum("hn, hnl -> hl", C, torch.exp(K)).real


class S4D(nn.Module):
    def __init__(self):
        super().__init__()
        self.D = nn.Parameter(torch.randn(H))
        self.kernel = S4DKernel()
        self.output_linear = nn.Sequential(nn.Conv1d(H, 2 * H, kernel_size=1), nn.GLU(dim=-2))

    def forward(self, u):  # (B, H, L)
        k_f = torch.fft.rfft(self.kernel(L), n=2 * L)
        y = torch.fft.irfft(torch.fft.rfft(u, n=2 * L) * k_f, n=2 * L)[..., :L]
        y = y + u * self.D.unsqueeze(-1)
        return self.output_linear(nn.functional.gelu(y))


encoder, layer, norm, decoder = nn.Linear(1, H), S4D(), nn.LayerNorm(H), nn.Linear(H, 4)
model = nn.ModuleList([encoder, layer, norm, decoder])
every = list(model.parameters())
optimizer = optim.AdamW([p for p in every if not hasattr(p, "_optim")], lr=0.01, weight_decay=0.01)
hps = [
    dict(s)
    for s in dict.fromkeys(frozenset(p._optim.items()) for p in every if hasattr(p, "_optim"))
]
for hp in hps:
    optimizer.add_param_group(
        {"params": [p for p in every if getattr(p, "_optim", None) == hp], **hp}
    )
scheduler = optim.lr_scheduler.CosineAnnealingLR(optimizer, STEPS)

for _ in range(STEPS):
    y = torch.randint(0, 4, (B,))
    x = 0.1 * torch.randn(B, L, 1)
    x[..., 0] += 0.5 * (y.float() - 1.5).unsqueeze(1)
    h = encoder(x).transpose(-1, -2)
    h = h + layer(norm(h.transpose(-1, -2)).transpose(-1, -2))
    loss = nn.functional.cross_entropy(decoder(h.mean(-1)), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    scheduler.step()
