"""Residual branches behind a gate that starts at zero: ReZero (x + alpha * F(x), alpha a
1-element parameter of the block, 0 at init), SkipInit (a 0-d skip_gain), Flamingo's gated
cross-attention (x + tanh(g) * xattn(x, media), g = 0), and timm's LayerScale in a module of
its own (ls1 = LayerScale(dim, 1e-5) beside attn). Healthy: the first step moves each gate.
Bugs: `frozen` (ReZero's alpha with requires_grad=False: its blocks never learn), `dead`
(ReZero, plus a side path behind a ReLU whose bias keeps every unit off)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "rezero"
V, T, D, H = 12, 8, 16, 2


class ReZero(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(D, H, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(D, 2 * D), nn.ReLU(), nn.Linear(2 * D, D))
        self.alpha = nn.Parameter(torch.zeros(1), requires_grad=MODE != "frozen")

    def forward(self, x):
        x = x + self.alpha * self.attn(x, x, x, need_weights=False)[0]
        return x + self.alpha * self.ff(x)


class SkipInit(nn.Module):
    def __init__(self):
        super().__init__()
        self.ff = nn.Sequential(nn.ReLU(), nn.Linear(D, D), nn.ReLU(), nn.Linear(D, D))
        self.skip_gain = nn.Parameter(torch.zeros(()))

    def forward(self, x):
        return x + self.skip_gain * self.ff(x)


class TanhGated(nn.Module):
    def __init__(self):
        super().__init__()
        self.media = nn.Linear(4, D)
        self.xattn = nn.MultiheadAttention(D, H, batch_first=True)
        self.attn_gate = nn.Parameter(torch.tensor([0.0]))

    def forward(self, x):
        media = self.media(torch.ones(x.shape[0], 3, 4))
        return x + self.xattn(x, media, media, need_weights=False)[0] * self.attn_gate.tanh()


class LayerScale(nn.Module):
    def __init__(self):
        super().__init__()
        self.gamma = nn.Parameter(1e-5 * torch.ones(D))

    def forward(self, x):
        return x * self.gamma


class ScaledBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.attn = nn.MultiheadAttention(D, H, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(D, 2 * D), nn.GELU(), nn.Linear(2 * D, D))
        self.ls1, self.ls2 = LayerScale(), LayerScale()

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.ls1(self.attn(h, h, h, need_weights=False)[0])
        return x + self.ls2(self.mlp(self.norm2(x)))


BLOCKS = {"skipinit": SkipInit, "tanh": TanhGated, "layerscale": ScaledBlock}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        if MODE == "layerscale":  # a ViT's patches: a linear stem, not a lookup table
            self.emb, self.stem = None, nn.Linear(V, D)
        self.pos = nn.Parameter(torch.randn(T, D) * 0.02)
        block = BLOCKS.get(MODE, ReZero)
        self.blocks = nn.Sequential(block(), block())
        if MODE == "dead":
            self.side = nn.Linear(D, D)
            nn.init.constant_(self.side.bias, -100.0)
        self.head = nn.Linear(D, V)

    def forward(self, idx):
        x = self.emb(idx) if MODE != "layerscale" else self.stem(F.one_hot(idx, V).float())
        x = self.blocks(x + self.pos)
        if MODE == "dead":
            x = x + F.relu(self.side(x))
        return self.head(x)


model = Model()
opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=3e-3)
for _step in range(20):
    x = torch.randint(0, V, (16, T + 1))
    for t in range(1, T + 1):
        x[:, t] = (x[:, t - 1] + 1) % V
    loss = F.cross_entropy(model(x[:, :-1]).reshape(-1, V), x[:, 1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
print("final", loss.item())
