"""Monte Carlo dropout (Gal & Ghahramani 2016): a regression MLP trained as usual; every 10
steps an evaluation keeps the dropouts on (model.train() under no_grad) and averages 8
stochastic passes over the same inputs for a mean and an uncertainty. Modes: `mc`;
`mc-vmap` (the 8 passes as one torch.func.vmap call with randomness='different'); `mc-bn`
(the model has a BatchNorm, whose running statistics each pass folds in); bugs `batches`
(a plain evaluation over 4 held-out batches in train mode) and `batches-vmap` (the same,
vmapped over the batches with randomness='same')."""

import sys

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import vmap

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "mc"
norm = nn.BatchNorm1d(32) if MODE == "mc-bn" else nn.Identity()
net = nn.Sequential(nn.Linear(1, 32), norm, nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 1))
opt = torch.optim.Adam(net.parameters(), lr=3e-3)
held_out = torch.linspace(-3, 3, 64).unsqueeze(1)
for step in range(30):
    x = torch.rand(32, 1) * 6 - 3
    loss = F.mse_loss(net(x), torch.sin(x))
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 10 == 9:
        with torch.no_grad():
            if MODE == "batches":
                errors = [F.mse_loss(net(b), torch.sin(b)) for b in held_out.split(16)]
            elif MODE == "batches-vmap":
                batches = held_out.view(4, 16, 1)
                errors = [F.mse_loss(vmap(net, randomness="same")(batches), torch.sin(batches))]
            elif MODE == "mc-vmap":
                lanes = vmap(lambda _: net(held_out), randomness="different")(torch.arange(8))
                errors = [F.mse_loss(lanes.mean(0), torch.sin(held_out))]
            else:
                preds = torch.stack([net(held_out) for _ in range(8)])
                errors = [F.mse_loss(preds.mean(0), torch.sin(held_out))]
        print(step, loss.item(), sum(errors).item())
