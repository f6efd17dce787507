"""A classifier with BatchNorm and dropout on 4 Gaussian blobs in 20 dimensions, with one
case picked by argv[1] (the modes, BatchNorm statistics, Adam's eps, the batches):

healthy          Adam, train mode, an evaluation (eval() ... train()) every 10 steps
eval-left        the evaluation at step 3 switches to eval() and never back
momentum0        BatchNorm1d(momentum=0): its running statistics never move
frozen-scratch   every BatchNorm put in eval (frozen) in a model trained from scratch
frozen-backbone  a pretrained backbone frozen (requires_grad False, BatchNorms in eval),
                 a new head trained: healthy
norm-eval        pretrained BatchNorms kept in eval while their weights train
                 (mmdetection's norm_eval): healthy
eps-large        Adam(eps=1.0)
one-batch        the same batch every step
contrastive      a contrastive loss between two views of fresh samples, its labels the
                 positions 0..B-1 at every step: healthy
eval-train       the evaluation at step 3, 13, ... under no_grad without eval(): BatchNorm
                 and dropout in train mode
eval-inference   the same under torch.inference_mode()
guess            a label guess under no_grad at every step, in train mode (MixMatch): healthy
ema-teacher      an EMA copy (BatchNorm in train mode, BYOL's target) run under no_grad at
                 every step: healthy
update-bn        swa_utils.update_bn recalibrating the BatchNorms at step 10: healthy
"""

import copy
import sys

import torch
import torch.nn.functional as F
from torch import nn

case = sys.argv[1] if len(sys.argv) > 1 else "healthy"
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 30
torch.manual_seed(0)
D, C, B = 20, 4, 32
centers = torch.randn(C, D) * 2


def batch(n: int = B) -> tuple[torch.Tensor, torch.Tensor]:
    y = torch.randint(0, C, (n,))
    return centers[y] + torch.randn(n, D), y


backbone = nn.Sequential(
    nn.Linear(D, 64), nn.BatchNorm1d(64, momentum=0 if case == "momentum0" else 0.1), nn.ReLU()
)
head = nn.Sequential(nn.Dropout(0.2), nn.Linear(64, B if case == "contrastive" else C))
model = nn.Sequential(backbone, head)
if case in ("frozen-backbone", "norm-eval"):  # "pretrained": statistics from real batches
    with torch.no_grad():
        for _ in range(20):
            backbone(batch()[0])
params = list(model.parameters())
if case == "frozen-backbone":
    backbone.requires_grad_(False)
    params = list(head.parameters())
eps = 1.0 if case == "eps-large" else 1e-8
opt = torch.optim.Adam(params, lr=1e-2, eps=eps)
teacher = copy.deepcopy(model)
fixed = batch()
for step in range(1, steps + 1):
    if case in ("frozen-scratch", "frozen-backbone", "norm-eval"):
        for m in backbone.modules():
            if isinstance(m, nn.BatchNorm1d):
                m.eval()
    x, y = fixed if case == "one-batch" else batch()
    if case == "guess":  # sharpened predictions on an unlabeled batch as extra targets
        with torch.no_grad():
            guess = F.softmax(model(batch()[0]) / 0.5, 1)
        y = guess.argmax(1)[: len(y)] if step > 1000 else y
    if case == "ema-teacher":
        with torch.no_grad():
            teacher(x)
    if case == "contrastive":  # two noisy views of each sample: which pairs match
        z1, z2 = model(x), model(x + 0.1 * torch.randn_like(x))
        loss = F.cross_entropy(F.normalize(z1) @ F.normalize(z2).T / 0.1, torch.arange(B))
    else:
        loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if case == "ema-teacher":
        with torch.no_grad():
            for t_p, p in zip(teacher.parameters(), model.parameters(), strict=True):
                t_p.mul_(0.99).add_(p, alpha=0.01)
    if step % 10 == 3 and case in ("eval-train", "eval-inference"):
        with torch.no_grad() if case == "eval-train" else torch.inference_mode():
            model(batch(256)[0])
    if step == 10 and case == "update-bn":
        data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(batch(256)[0]), 64)
        torch.optim.swa_utils.update_bn(data, model)
    if step % 10 == 3 and case in ("healthy", "eval-left"):
        model.eval()
        with torch.no_grad():
            model(batch(256)[0])
        if case == "healthy":
            model.train()
