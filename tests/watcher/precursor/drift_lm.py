# An MLP language model over a 512-symbol Markov chain (nearly one successor per symbol),
# 32 tokens a step, so that each symbol is a target once in about 16 steps: an embedding, a
# residual MLP block under LayerNorm, a final LayerNorm and a ReLU into a head with a bias;
# the forward in bfloat16 (autocast), the loss in float32; AdamW (beta2 0.95) at 3e-2 after
# a 50-step warm-up. The cross-entropy's gradient on a class absent from a step is small and
# positive, on each of the head's weights of the sign of its (non-negative) feature: Adam
# makes each such step a share of the lr, so every row of the head and its bias drift down
# together and log Z with them, while the loss falls; later the loss rises for good (the
# mode picked by argv[1]):
#   drift   no weight decay, no z-loss: log Z from 5.2 to -5 by step 1,200, -11 by 6,000,
#           -22 by 12,000; the loss 4.1-4.2 at its best (3,000-4,500), 5.5 by 12,000
#   zloss   the same with a z-loss of 1e-4 * log Z**2: the same drift and divergence (Adam
#           ignores the z-loss's 1 + 2e-4 * log Z scaling of the absent classes' gradient)
#   decay   the same with weight decay 0.1: log Z held between 1.2 and -2.4, the loss at
#           4.45-4.6 to step 14,000: healthy
# ARGS: MODE [STEPS] [SEED]
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from markov_text import batches

mode = sys.argv[1] if len(sys.argv) > 1 else "drift"
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 1500
seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
torch.manual_seed(seed)
V, D, B, T, PEAK, WARMUP = 512, 64, 4, 8, 3e-2, 50
Z_LOSS = 1e-4 if mode == "zloss" else 0.0
DECAY = 0.1 if mode == "decay" else 0.0
table = torch.distributions.Dirichlet(torch.full((V,), 0.01)).sample((V,))
data = batches(table, 1 + seed, B, T)  # markov_text.py: drawn once a process


class MLPLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.ln1 = nn.Embedding(V, D), nn.LayerNorm(D)
        self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))
        self.ln_f, self.head = nn.LayerNorm(D), nn.Linear(D, V)

    def forward(self, idx):
        x = self.wte(idx)
        x = x + self.mlp(self.ln1(x))
        return self.head(torch.relu(self.ln_f(x)))


model = MLPLM()
opt = torch.optim.AdamW(model.parameters(), lr=PEAK, weight_decay=DECAY, betas=(0.9, 0.95))
for step in range(1, steps + 1):
    for group in opt.param_groups:
        group["lr"] = PEAK * min(1.0, step / WARMUP)
    x, y = next(data)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(x).reshape(-1, V).float()
    loss = F.cross_entropy(logits, y.reshape(-1))
    if Z_LOSS:
        loss = loss + Z_LOSS * torch.logsumexp(logits, -1).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
