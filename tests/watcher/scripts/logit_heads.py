# Two attention layers, one through scaled_dot_product_attention (is_causal, its q and k
# read on sampled steps), one as minGPT writes it (softmax over masked q @ k^T scores),
# and a cross_entropy over 11 classes; ARGS: STEPS [qknorm-grow]. qknorm-grow puts a
# LayerNorm on the fused layer's q and k and grows its gains 3% a step (a gain that nothing
# decays): qk-layernorm, and still logits that grow
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 32
GROW = sys.argv[2:] == ["qknorm-grow"]
torch.manual_seed(0)
D, H, T, V = 16, 2, 8, 11


class Fused(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(D, 3 * D)
        self.q_norm, self.k_norm = nn.LayerNorm(D // H), nn.LayerNorm(D // H)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, H, D // H).transpose(1, 3).unbind(2)
        if GROW:
            q, k = self.q_norm(q), self.k_norm(k)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return y.transpose(1, 2).reshape(b, t, D)


class Manual(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(D, 3 * D)
        self.register_buffer("mask", torch.tril(torch.ones(T, T)).view(1, 1, T, T))

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, H, D // H).transpose(1, 3).unbind(2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return y.transpose(1, 2).reshape(b, t, D)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.fused, self.manual = nn.Embedding(V, D), Fused(), Manual()
        self.head = nn.Linear(D, V)

    def forward(self, idx):
        x = self.emb(idx)
        return self.head(self.manual(x + self.fused(x)))


model = Net()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for _ in range(steps):
    idx = torch.randint(0, V, (4, T + 1))
    logits = model(idx[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, V), idx[:, 1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    if GROW:
        with torch.no_grad():
            model.fused.q_norm.weight.mul_(1.03)
            model.fused.k_norm.weight.mul_(1.03)
