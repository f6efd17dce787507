"""A one-stage grid detector (YOLO-style): objectness BCE over every cell, GIoU and class
cross-entropy on the cells that hold an object. Every fourth batch holds no object; the
healthy loop trains only objectness on it. Modes: `guarded` (healthy); bug `unguarded`,
whose box and class terms are means over no cell there (NaN)."""

import sys

import torch
from torch import nn
from torch.nn import functional as F

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "guarded"
G, C = 4, 3


def giou_loss(a, b):
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    inter = (torch.min(a[:, 2:], b[:, 2:]) - torch.max(a[:, :2], b[:, :2])).clamp(min=0).prod(1)
    union = area_a + area_b - inter
    hull = (torch.max(a[:, 2:], b[:, 2:]) - torch.min(a[:, :2], b[:, :2])).prod(1)
    return (1 - inter / (union + 1e-7) + (hull - union) / (hull + 1e-7)).mean()


def batch(step, n=4):
    img = torch.rand(n, 3, 16, 16) * 0.1
    obj, box = torch.zeros(n, G, G), torch.zeros(n, G, G, 4)
    cls = torch.zeros(n, G, G, dtype=torch.long)
    for i in range(n if step % 4 else 0):
        cx, cy, k = int(torch.randint(2, 14, ())), int(torch.randint(2, 14, ())), i % C
        img[i, k, cy - 2 : cy + 2, cx - 2 : cx + 2] = 1.0
        obj[i, cy // 4, cx // 4], cls[i, cy // 4, cx // 4] = 1, k
        box[i, cy // 4, cx // 4] = torch.tensor([cx - 2, cy - 2, cx + 2, cy + 2]) / 16
    return img, obj, box, cls


net = nn.Sequential(
    nn.Conv2d(3, 8, 3, 2, 1), nn.SiLU(), nn.Conv2d(8, 8, 3, 2, 1), nn.SiLU(), nn.Conv2d(8, 5 + C, 1)
)
opt = torch.optim.Adam(net.parameters(), lr=3e-3)
gy, gx = torch.meshgrid(torch.arange(G).float(), torch.arange(G).float(), indexing="ij")
for step in range(12):
    img, obj, box, cls = batch(step)
    out = net(img).permute(0, 2, 3, 1)
    loss = F.binary_cross_entropy_with_logits(out[..., 4], obj)
    pos = obj > 0
    if pos.any() or MODE == "unguarded":
        centre = (torch.stack([gx, gy], -1) + out[..., :2].sigmoid()) / G
        half = out[..., 2:4].sigmoid() / 4
        pred = torch.cat([centre - half, centre + half], -1)
        loss = loss + giou_loss(pred[pos], box[pos]) + F.cross_entropy(out[..., 5:][pos], cls[pos])
    opt.zero_grad()
    loss.backward()
    opt.step()
