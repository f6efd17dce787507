# A learned complex-valued frequency filter (a complex64 parameter) before a real linear layer,
# fitted by MSE; the optimizer by argv[1]: adam | adamw-amsgrad | sgd | rmsprop
# ARGS: OPTIMIZER [STEPS]
import sys

import torch
from torch import nn

which = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 30
torch.manual_seed(0)
N = 32


class SpectralFilter(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(N // 2 + 1, dtype=torch.complex64) * 0.1)
        self.out = nn.Linear(N, N)

    def forward(self, x):
        return self.out(torch.fft.irfft(torch.fft.rfft(x) * self.w, n=N))


model = SpectralFilter()
target = torch.zeros(N // 2 + 1, dtype=torch.complex64)
target[:6] = 1
opt = {
    "adam": lambda: torch.optim.Adam(model.parameters(), lr=1e-2),
    "adamw-amsgrad": lambda: torch.optim.AdamW(model.parameters(), lr=1e-2, amsgrad=True),
    "sgd": lambda: torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
    "rmsprop": lambda: torch.optim.RMSprop(model.parameters(), lr=1e-3),
}[which]()
for _ in range(steps):
    x = torch.randn(64, N)
    y = torch.fft.irfft(torch.fft.rfft(x) * target, n=N) + 0.01 * torch.randn(64, N)
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
