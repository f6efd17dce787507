"""A sentence encoder trained on its mean-pooled tokens while the model still computes a
pooler its loss never reads (BertModel's pooler_output under mean pooling), with the
learning rate decayed linearly to 0 at the last step (the HF Trainer's default
schedule). Modes: `linear` (to 0), `constant`."""

import sys

import torch
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "linear"
STEPS = 30


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(32, 16)
        self.layer = nn.Linear(16, 16)
        self.pooler = nn.Linear(16, 16)
        self.head = nn.Linear(16, 1)

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = torch.tanh(self.layer(self.embed(ids)))
        return hidden, torch.tanh(self.pooler(hidden[:, 0]))


model = Encoder()
opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
decay = (lambda s: max(0.0, 1 - s / STEPS)) if MODE == "linear" else (lambda s: 1.0)
sched = torch.optim.lr_scheduler.LambdaLR(opt, decay)
for _ in range(STEPS):
    ids = torch.randint(0, 32, (16, 6))
    hidden, _pooled = model(ids)
    target = (ids < 16).float().mean(1, keepdim=True)  # the share of tokens of one kind
    loss = nn.functional.mse_loss(model.head(hidden.mean(1)), target)
    loss.backward()
    opt.step()
    opt.zero_grad()
    sched.step()
