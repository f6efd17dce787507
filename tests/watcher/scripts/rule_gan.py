# a small GAN on a 2-D Gaussian: D and G steps alternate, each with its own Adam;
# --d-no-zero-grad drops D's zero_grad (G's optimizer still resets its own)
import sys

import torch
from torch import nn

bug = "--d-no-zero-grad" in sys.argv
torch.manual_seed(0)
G = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))
D = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
opt_d = torch.optim.Adam(D.parameters(), lr=1e-3, betas=(0.5, 0.999))
opt_g = torch.optim.Adam(G.parameters(), lr=1e-3, betas=(0.5, 0.999))
bce = nn.functional.binary_cross_entropy_with_logits
for _step in range(150):
    real = torch.randn(32, 2) * 0.5 + torch.tensor([2.0, -1.0])
    fake = G(torch.randn(32, 4))
    if not bug:
        opt_d.zero_grad()
    d_loss = bce(D(real), torch.ones(32, 1)) + bce(D(fake.detach()), torch.zeros(32, 1))
    d_loss.backward()
    opt_d.step()
    opt_g.zero_grad()
    g_loss = bce(D(fake), torch.ones(32, 1))
    g_loss.backward()
    opt_g.step()
