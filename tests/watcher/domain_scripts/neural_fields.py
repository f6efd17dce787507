# Neural fields: a Plenoxels-style voxel grid fitted directly (grid_sample, RMSprop at a
# high lr, as its reference does), NeRF's coarse and fine networks (the same class, each
# initialised on its own), an occupancy network's BCE-with-logits summed over each shape's
# query points and averaged over the shapes.
# argv: voxels (healthy); voxels-zero (bug: the density grid started at 0 under its ReLU:
# neither it nor the colours it weighs ever get a gradient); coarse-fine (healthy);
# fine-outside (bug: the fine network left out of the optimizer); copy-outside (bug: a deep
# copy of the coarse network added to the loss with gradients, outside the optimizer);
# occupancy (healthy); occupancy-sigmoid (bug: a sigmoid before
# binary_cross_entropy_with_logits); hash (healthy: Instant-NGP's hash tables as
# HashNeRF-pytorch writes them, nn.Embedding entries within ±1e-4, RAdam at 1e-2 with eps
# 1e-15); hash-tiny-mlp (look-alike: its MLP's Linear weights started within ±1e-4 too,
# each step moves them by far more than their size).
import copy
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "voxels"
R, STEPS = 8, 40


def rays(n):
    th = torch.rand(n) * 6.283
    o = torch.stack([2 * th.cos(), 2 * th.sin(), torch.rand(n) * 0.4 - 0.2], -1)
    d = F.normalize(torch.randn(n, 3) * 0.2 - o / 2, dim=-1)
    z = torch.linspace(0.5, 3.5, 16)
    pts = o[:, None] + d[:, None] * z[None, :, None]
    hit = (pts.norm(dim=-1) < 0.6).float().max(-1).values
    return pts, z[1] - z[0], torch.stack([hit * 0.9, hit * 0.2, 0.1 + 0 * hit], -1)


def composite(sigma, rgb, delta):
    alpha = 1 - torch.exp(-sigma * delta)
    ones = torch.ones_like(alpha[:, :1])
    trans = torch.cumprod(torch.cat([ones, 1 - alpha + 1e-10], -1), -1)[:, :-1]
    return ((alpha * trans)[..., None] * rgb).sum(1)


def fit_grid():
    start = 0.0 if MODE == "voxels-zero" else 0.1
    density = torch.full((1, 1, R, R, R), start, requires_grad=True)
    color = torch.zeros(1, 3, R, R, R, requires_grad=True)
    opt_d = torch.optim.RMSprop([density], lr=1.0, alpha=0.95)
    opt_c = torch.optim.RMSprop([color], lr=0.1, alpha=0.95)
    for _ in range(STEPS):
        pts, delta, gt = rays(64)
        g = pts.view(1, -1, 1, 1, 3) / 1.5
        sigma = F.relu(F.grid_sample(density, g, align_corners=True).view(64, -1))
        rgb = F.grid_sample(color, g, align_corners=True).view(3, 64, -1).permute(1, 2, 0)
        rgb = torch.sigmoid(rgb)
        loss = F.mse_loss(composite(sigma, rgb, delta), gt)
        loss = loss + 1e-3 * (density[..., 1:] - density[..., :-1]).pow(2).mean()  # TV
        opt_d.zero_grad()
        opt_c.zero_grad()
        loss.backward()
        opt_d.step()
        opt_c.step()


class Field(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(3, 32), nn.ReLU(), nn.Linear(32, 4))

    def forward(self, pts):
        out = self.net(pts)
        return F.softplus(out[..., 0]), torch.sigmoid(out[..., 1:])


def fit_coarse_fine():
    coarse = Field()
    fine = copy.deepcopy(coarse) if MODE == "copy-outside" else Field()
    trained = list(coarse.parameters())
    if MODE == "coarse-fine":
        trained += list(fine.parameters())
    opt = torch.optim.Adam(trained, lr=5e-4)
    for _ in range(STEPS):
        pts, delta, gt = rays(64)
        loss = F.mse_loss(composite(*coarse(pts), delta), gt)
        loss = loss + F.mse_loss(composite(*fine(pts), delta), gt)
        opt.zero_grad()
        loss.backward()
        opt.step()


def fit_occupancy():
    net = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 1))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    for _ in range(STEPS):
        r = torch.rand(8, 1, 1) * 0.5 + 0.3
        q = torch.rand(8, 64, 3) * 2.2 - 1.1
        occ = (q.norm(dim=-1) < r[..., 0]).float()
        logits = net(torch.cat([q, r.expand(-1, 64, 1)], -1))[..., 0]
        if MODE == "occupancy-sigmoid":
            logits = torch.sigmoid(logits)
        bce = F.binary_cross_entropy_with_logits(logits, occ, reduction="none")
        loss = bce.sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


class HashEncoding(nn.Module):
    def __init__(self, levels=4, size=2**8):
        super().__init__()
        self.size, self.res = size, [4 * 2**i for i in range(levels)]
        self.tables = nn.ModuleList(nn.Embedding(size, 2) for _ in range(levels))
        for table in self.tables:
            nn.init.uniform_(table.weight, -1e-4, 1e-4)

    def forward(self, x):
        out = []
        for table, res in zip(self.tables, self.res, strict=True):
            scaled = x * res
            corner, frac = scaled.floor().long(), scaled - scaled.floor()
            value = 0
            for dx in (0, 1):
                for dy in (0, 1):
                    c = corner + torch.tensor([dx, dy])
                    index = (c[:, 0] ^ (c[:, 1] * 2654435761)) % self.size
                    wx = frac[:, 0] if dx else 1 - frac[:, 0]
                    wy = frac[:, 1] if dy else 1 - frac[:, 1]
                    value = value + (wx * wy)[:, None] * table(index)
            out.append(value)
        return torch.cat(out, -1)


def fit_hash():
    encoding = HashEncoding()
    mlp = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3))
    if MODE == "hash-tiny-mlp":
        for layer in (mlp[0], mlp[2]):
            nn.init.uniform_(layer.weight, -1e-4, 1e-4)
    groups = [
        {"params": mlp.parameters(), "weight_decay": 1e-6},
        {"params": encoding.parameters(), "eps": 1e-15},
    ]
    opt = torch.optim.RAdam(groups, lr=1e-2, betas=(0.9, 0.99))
    side = torch.linspace(0, 1, 16)
    xy = torch.stack(torch.meshgrid(side, side, indexing="ij"), -1).reshape(-1, 2)
    image = torch.cat([torch.sin(6 * xy), xy.prod(-1, keepdim=True)], -1)
    for _ in range(STEPS):
        batch = torch.randint(0, len(xy), (128,))
        loss = F.mse_loss(mlp(encoding(xy[batch])), image[batch])
        opt.zero_grad()
        loss.backward()
        opt.step()


if MODE.startswith("hash"):
    fit_hash()
elif MODE.startswith("voxels"):
    fit_grid()
elif MODE.startswith("occupancy"):
    fit_occupancy()
else:
    fit_coarse_fine()
