# One attention as minGPT writes it and a cross-entropy over 11 classes, each written
# another way than through torch.nn.functional's softmax and cross_entropy; ARGS: STEPS
# WAY, WAY one of: method (`att.softmax(-1)`, `logits.log_softmax(-1)` + F.nll_loss on a
# view of it), torch (`torch.softmax(att, -1)`, F.log_softmax + F.nll_loss), other (a
# log_softmax whose output no nll_loss reads, an nll_loss of other log-probabilities)
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 32
WAY = sys.argv[2] if len(sys.argv) > 2 else "method"
torch.manual_seed(0)
D, H, T, V = 16, 2, 8, 11


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
        att = att.softmax(dim=-1) if WAY == "method" else torch.softmax(att, -1)
        return (att @ v).transpose(1, 2).reshape(b, t, D)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.attn, self.head = nn.Embedding(V, D), Manual(), nn.Linear(D, V)

    def forward(self, idx):
        return self.head(self.attn(self.emb(idx)))


def loss_of(logits, y):
    if WAY == "method":
        return F.nll_loss(logits.log_softmax(-1).view(-1, V), y.reshape(-1))
    if WAY == "torch":
        return F.nll_loss(F.log_softmax(logits.reshape(-1, V), dim=-1), y.reshape(-1))
    F.log_softmax(logits, -1)  # read by nothing
    probs = torch.full((y.numel(), V), 1.0 / V).log()
    return F.nll_loss(probs, y.reshape(-1)) + logits.pow(2).mean()


model = Net()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for _ in range(steps):
    idx = torch.randint(0, V, (4, T + 1))
    loss = loss_of(model(idx[:, :-1]), idx[:, 1:])
    opt.zero_grad()
    loss.backward()
    opt.step()
