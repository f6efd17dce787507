"""A VQ-VAE (van den Oord et al. 2017) with a learned codebook: the codebook loss
‖sg(z) - e‖² pulls the code vectors toward the encoder's outputs and the commitment loss
β‖z - sg(e)‖² the outputs toward them, straight-through to the decoder. With the
codebook started small (uniform ±1/K) the encoder's outputs grow away from it, so the sum
rises for the first hundred steps while the reconstruction falls. argv: bug "spike" (one
batch scaled 100× at step 90)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else ""
K, D = 16, 8
enc = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, D))
dec = nn.Sequential(nn.Linear(D, 32), nn.ReLU(), nn.Linear(32, 32))
codebook = nn.Embedding(K, D)
codebook.weight.data.uniform_(-1 / K, 1 / K)
params = [*enc.parameters(), *dec.parameters(), *codebook.parameters()]
opt = torch.optim.Adam(params, lr=2e-3)
protos = torch.randn(8, 32)

for step in range(120):
    x = protos[torch.randint(0, 8, (32,))] + 0.1 * torch.randn(32, 32)
    if MODE == "spike" and step == 90:
        x = x * 100
    z = enc(x)
    e = codebook(torch.cdist(z.detach(), codebook.weight.detach()).argmin(1))
    recon = dec(z + (e - z).detach())
    loss = F.mse_loss(recon, x) + F.mse_loss(e, z.detach()) + 0.25 * F.mse_loss(z, e.detach())
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 20 == 0:
        print(step, loss.item(), file=sys.stderr)
