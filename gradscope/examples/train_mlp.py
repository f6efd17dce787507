"""A plain training loop: an MLP classifier on noisy synthetic data (healthy).

gradscope watch gradscope/examples/train_mlp.py -- --steps 300
"""

import argparse

import torch
from torch import nn
from torch.nn import functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=300)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

torch.manual_seed(args.seed)
features, classes = 20, 5
centers = torch.randn(classes, features)
labels = torch.randint(0, classes, (2048,))
inputs = centers[labels] + 1.5 * torch.randn(2048, features)  # overlapping classes: loss stays > 0

model = nn.Sequential(
    nn.Linear(features, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, classes)
)
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

for step in range(args.steps):
    batch = torch.randint(0, len(inputs), (args.batch_size,))
    loss = F.cross_entropy(model(inputs[batch]), labels[batch])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 100 == 0:
        print(f"step {step}: loss {loss.item():.3f}")
