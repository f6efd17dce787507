"""A plain training loop: a small CNN with BatchNorm on synthetic images (healthy).

gradscope watch gradscope/examples/train_cnn.py -- --steps 200
"""

import argparse

import torch
from torch import nn
from torch.nn import functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=200)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

torch.manual_seed(args.seed)
classes = 4
patterns = torch.randn(classes, 1, 12, 12)
labels = torch.randint(0, classes, (1024,))
images = patterns[labels] + 2.0 * torch.randn(1024, 1, 12, 12)

model = nn.Sequential(
    nn.Conv2d(1, 8, 3, padding=1),
    nn.BatchNorm2d(8),
    nn.ReLU(),
    nn.MaxPool2d(2),
    nn.Conv2d(8, 16, 3, padding=1),
    nn.BatchNorm2d(16),
    nn.ReLU(),
    nn.AdaptiveAvgPool2d(1),
    nn.Flatten(),
    nn.Linear(16, classes),
)
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

for step in range(args.steps):
    batch = torch.randint(0, len(images), (args.batch_size,))
    loss = F.cross_entropy(model(images[batch]), labels[batch])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 100 == 0:
        print(f"step {step}: loss {loss.item():.3f}")
