# three backward calls, no optimizer and no update: nothing for watch to judge
import torch
from torch import nn

model = nn.Linear(3, 1)
for _ in range(3):
    model(torch.randn(4, 3)).sum().backward()
