"""A Transformer Hawkes process's event-type loss (Zuo et al. 2020) on padded sequences:
types 1..K with 0 the embedding's padding_idx, the next event's type predicted from the
causal encoder's state before it, its classes the types less one; the padded events' class
clamped to 0 and their per-event cross-entropy (reduction='none') weighed out after it.
Modes: `mul` (times the events' mask), `fill` (`masked_fill` where padded); bug `unmasked`
(summed with the padding in: the padded events are trained to class 0)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "mul"
B, L, D, K, STEPS = 8, 10, 8, 3, 4


def events():
    types = torch.randint(1, K + 1, (B, L))
    real = torch.arange(L)[None] < torch.randint(L // 2, L + 1, (B, 1))
    return types * real, real


class EventEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(K + 1, D, padding_idx=0)
        self.encoder = nn.TransformerEncoderLayer(D, 2, 16, dropout=0.0, batch_first=True)
        self.type_head = nn.Linear(D, K)

    def forward(self, types, real):
        causal = torch.triu(torch.ones(L, L, dtype=torch.bool), 1)
        return self.encoder(self.embed(types), src_mask=causal, src_key_padding_mask=~real)


model = EventEncoder()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for _ in range(STEPS):
    types, real = events()
    states = model(types, real)[:, :-1]
    logits = model.type_head(states).reshape(-1, K)
    classes = (types[:, 1:] - 1).clamp(min=0).reshape(-1)
    per_event = F.cross_entropy(logits, classes, reduction="none")
    counted = real[:, 1:].reshape(-1)
    if MODE == "fill":
        loss = per_event.masked_fill(~counted, 0.0).sum() / counted.sum()
    elif MODE == "unmasked":
        loss = per_event.sum() / counted.sum()
    else:
        loss = (per_event * counted.float()).sum() / counted.sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
