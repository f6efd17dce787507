"""A plain training loop with two classic bugs, for the README's `gradscope watch` demo:
the optimizer is built before a head is added to the model (so the head is in no param
group), and one corrupted batch (inputs ×30) arrives at step 150.

    gradscope watch gradscope/examples/train_buggy.py --plot grads.png
"""

import argparse

import torch
from torch import nn
from torch.nn import functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=300)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

torch.manual_seed(args.seed)
features = 16
true_w = torch.randn(features, 1)


class Net(nn.Module):
    adapter: nn.Module  # set after the optimizer is built: the bug

    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Linear(features, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU()
        )
        self.head = nn.Linear(64, 1)

    def forward(self, x):
        h = self.encoder(x)
        return self.head(h + self.adapter(h))


model = Net()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
model.adapter = nn.Linear(64, 64)  # added after the optimizer was built: never updated

for step in range(1, args.steps + 1):
    inputs = torch.randn(32, features)
    targets = inputs @ true_w + 0.1 * torch.randn(32, 1)
    if step == 150:
        inputs = inputs * 30  # a corrupted batch
    loss = F.mse_loss(model(inputs), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 100 == 0:
        print(f"step {step}: loss {loss.item():.3f}")
