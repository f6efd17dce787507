# A char-level GPT (2 layers, or 3, d=64, context 32, its attention in the open) on text of a
# Markov chain over 27 symbols, AdamW at a high constant learning rate after a warm-up,
# that diverges by one mechanism picked by argv[1]:
#   attn         lr 0.15 after 100 steps of warm-up, no norm on q and k: the attention
#                logits grow from step ~100, the softmax saturates, the loss climbs back
#                toward the uniform guess (ln 27) from step ~390
#   attn-deep    the same with 3 layers: the loss diverges from step ~460
# (the steps of a watch with the CPU's kernels pinned, pinned.py: on a CPU's own vector
# kernels the collapse comes hundreds of steps earlier or later, or not by step 600)
#   attn-low     the same at lr 0.015: healthy (no qk-layernorm either)
#   attn-qknorm  the same at lr 0.15 with qk-layernorm: healthy
# SEED picks the initial weights and the data (0 by default): the same mechanism on other runs.
# ARGS: MODE [STEPS] [SEED]
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from markov_text import batches

mode = sys.argv[1] if len(sys.argv) > 1 else "attn"
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 600
seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
torch.manual_seed(seed)
V, T, B, D, H, WARMUP = 27, 32, 32, 64, 4, 100
LAYERS = 3 if mode == "attn-deep" else 2
PEAK = 0.015 if mode == "attn-low" else 0.15
QK_NORM = mode == "attn-qknorm"
table = torch.distributions.Dirichlet(torch.full((V,), 0.2)).sample((V,))
data = batches(table, 1 + seed, B, T)  # markov_text.py: drawn once a process


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        if QK_NORM:
            self.q_norm, self.k_norm = nn.LayerNorm(D // H), nn.LayerNorm(D // H)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, H, d // H).transpose(1, 3).unbind(2)
        if QK_NORM:
            q, k = self.q_norm(q), self.k_norm(k)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.attn, self.ln2 = nn.LayerNorm(D), Attention(), nn.LayerNorm(D)
        self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, D), nn.Embedding(T, D)
        self.h = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f, self.head = nn.LayerNorm(D), nn.Linear(D, V, bias=False)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for block in self.h:
            x = block(x)
        return self.head(self.ln_f(x))


model = GPT()
opt = torch.optim.AdamW(model.parameters(), lr=PEAK, weight_decay=0.0, betas=(0.9, 0.95))
for step in range(1, steps + 1):
    for group in opt.param_groups:
        group["lr"] = PEAK * min(1.0, step / WARMUP)
    x, y = next(data)
    logits = model(x)
    loss = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
