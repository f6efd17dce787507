"""The pytorch/examples mnist loop in miniature; batch 3 holds a zero that `log` turns into -inf.

Usage: nan_at_step3.py [EPOCHS]   (prints nothing; logs each loss to losses.log)
"""

import sys

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 16)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x):
        x = torch.log(x)  # LOG: log(0) = -inf in batch 3
        x = F.relu(self.fc1(x))
        return F.log_softmax(self.fc2(x), dim=1)


torch.manual_seed(0)
data = torch.rand(64, 4) + 0.5
data[40, :] = 0.0  # row 40: batch 3 of 16 (no shuffle)
targets = torch.randint(0, 3, (64,))
train_loader = DataLoader(TensorDataset(data, targets), batch_size=16)
model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for epoch in range(int(sys.argv[1]) if len(sys.argv) > 1 else 2):
    for batch_idx, (x, target) in enumerate(train_loader):
        optimizer.zero_grad()
        output = model(x)
        loss = F.nll_loss(output, target)
        with open("losses.log", "a") as f:
            f.write(f"{loss.item()!r} epoch {epoch} batch {batch_idx}\n")
        loss.backward()
        optimizer.step()
