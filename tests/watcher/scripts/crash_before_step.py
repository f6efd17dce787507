# raises in the forward of its first step, before any backward
import torch
from torch import nn


def forward(model, x):
    return model(x)


model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loss = forward(model, torch.randn(4, 5)).sum()
