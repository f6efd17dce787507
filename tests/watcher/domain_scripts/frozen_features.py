"""Networks frozen with requires_grad_(False) beside a trained one: a perceptual loss's
feature network (SRGAN), a linear probe's backbone, a MoCo key encoder moved by momentum,
BatchNorms frozen alone inside a trained block. Modes: `eval` (the feature network in eval
mode), `probe-eval` (the backbone switched to eval after each model.train()), `momentum`
(the key encoder in train mode, written by its momentum update), `affine` (only the
BatchNorms' affine frozen); bugs `train` (the feature network left in train mode),
`probe-train` (the frozen backbone trained in train mode with the head) and `in-optimizer`
(the feature network in eval but never frozen, its weights in the generator's optimizer,
a critic's optimizer stepping first as in SRGAN)."""

import sys

import torch
from torch import nn
from torch.nn import functional as F

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "eval"


def stack(channels=8):
    return nn.Sequential(
        nn.Conv2d(3, channels, 3, padding=1),
        nn.BatchNorm2d(channels),
        nn.ReLU(),
        nn.Conv2d(channels, channels, 3, padding=1),
        nn.BatchNorm2d(channels),
    )


class Probe(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone, self.head = stack(), nn.Linear(8, 4)

    def forward(self, x):
        return self.head(self.backbone(x).mean((2, 3)))


critic = nn.Linear(3, 1)
if MODE in ("eval", "train", "in-optimizer"):
    net, features = (
        nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 1)),
        stack(),
    )
    if MODE != "in-optimizer":
        features.requires_grad_(False)
    if MODE != "train":
        features.eval()
elif MODE in ("probe-eval", "probe-train"):
    net = Probe()
    net.backbone.requires_grad_(False)
elif MODE == "momentum":
    net, key = stack(), stack()
    key.load_state_dict(net.state_dict())
    key.requires_grad_(False)
else:  # affine
    net = nn.Sequential(stack(), nn.Flatten(), nn.Linear(512, 4))
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.requires_grad_(False)
trained = [p for p in net.parameters() if p.requires_grad]
if MODE == "in-optimizer":
    trained += features.parameters()
    opt_critic = torch.optim.SGD(critic.parameters(), lr=0.01)
opt = torch.optim.SGD(trained, lr=0.05, momentum=0.9)
for _ in range(6):
    net.train()
    if MODE == "probe-eval":
        net.backbone.eval()
    x, y = torch.rand(8, 3, 8, 8), torch.randint(0, 4, (8,))
    batch = x + 0.1 * torch.randn_like(x)
    if MODE == "in-optimizer":
        critic_loss = F.softplus(-critic(x.mean((2, 3)))).mean()
        opt_critic.zero_grad()
        critic_loss.backward()
        opt_critic.step()
    if MODE in ("eval", "train", "in-optimizer"):
        out = net(batch)
        loss = F.l1_loss(out, x) + F.mse_loss(features(out), features(x))
    elif MODE == "momentum":
        q = F.normalize(net(batch).mean((2, 3)), dim=1)
        with torch.no_grad():
            k = F.normalize(key(x + 0.1 * torch.randn_like(x)).mean((2, 3)), dim=1)
        loss = -(q * k).sum(1).mean()
    else:
        loss = F.cross_entropy(net(batch), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if MODE == "momentum":
        with torch.no_grad():
            for pk, pq in zip(key.parameters(), net.parameters(), strict=True):
                pk.mul_(0.99).add_(pq, alpha=0.01)
