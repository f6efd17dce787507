# a layer frozen by mistake at step 120 of 200 (requires_grad_(False)): its gradients are
# None from then on, or zeros with --zeros (zero_grad(set_to_none=False) keeps the tensors)
import sys

import torch
from torch import nn

zeros = "--zeros" in sys.argv
torch.manual_seed(0)
w = torch.randn(8, 1)
model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(1, 201):
    if step == 120:
        model[0].requires_grad_(False)
    x = torch.randn(32, 8)
    loss = nn.functional.mse_loss(model(x), x @ w)
    opt.zero_grad(set_to_none=not zeros)
    loss.backward()
    opt.step()
