"""The byol-pytorch README's training loop, verbatim from `learner = BYOL(` on, around a small
network (see ORIGIN)."""

import sys

import torch
from torch import nn

from byol_pytorch import BYOL

torch.manual_seed(0)
LR = float(sys.argv[sys.argv.index("--lr") + 1]) if "--lr" in sys.argv else 3e-4


class SmallNet(nn.Module):
    """resnet50's layout in miniature: features, an `avgpool` layer, a classifier."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        )  # fmt: skip
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.avgpool(self.features(x)), 1))


resnet = SmallNet()

learner = BYOL(
    resnet,
    image_size = 32,
    hidden_layer = 'avgpool',
    projection_size = 32,
    projection_hidden_size = 64,
)  # fmt: skip

opt = torch.optim.Adam(learner.parameters(), lr=LR)

def sample_unlabelled_images():
    return torch.randn(20, 3, 32, 32)

for _ in range(100):
    images = sample_unlabelled_images()
    loss = learner(images)
    if "no-zero-grad" not in sys.argv:
        opt.zero_grad()
    loss.backward()
    opt.step()
    learner.update_moving_average() # update moving average of target encoder
