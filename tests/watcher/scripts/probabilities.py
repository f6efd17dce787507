"""A loss fed probabilities where it wants logits, on a small classifier, a character-level
language model with one self-attention layer (its own softmax feeds the attention, not the
loss) and a multi-label tagger; the case picked by argv[1]:

clf-softmax    cross_entropy(softmax(logits, 1)) over 10 classes (floor 1.46)
clf-softmax20  the same over 20 classes (floor 2.08)
clf-dim0       cross_entropy(softmax(logits, 0)): the softmax runs over the batch
clf-logsm0     nll_loss(log_softmax(logits, 0)): log-probabilities over the batch
lm-softmax     cross_entropy(softmax(logits, -1).view(-1, V)) in the language model
lm-seq         cross_entropy(softmax(logits, 1).view(-1, V)): over the sequence
lm-transpose   cross_entropy(softmax(logits, -1).transpose(1, 2), y): (B, V, T) input
tag-sigmoid    binary_cross_entropy_with_logits(sigmoid(out), y) (floor 0.31)
healthy look-alikes: clf, clf-logsm (log_softmax then cross_entropy), clf-nll (log_softmax
then nll_loss), lm (attention softmax, raw logits), tag-bce (sigmoid then
binary_cross_entropy), tag (raw logits)
"""

import sys

import torch
import torch.nn.functional as F
from torch import nn

case = sys.argv[1] if len(sys.argv) > 1 else "clf"
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 30
torch.manual_seed(0)


class Attention(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(h).chunk(3, -1)
        mask = torch.ones(h.shape[1], h.shape[1]).tril().bool()
        scores = (q @ k.transpose(1, 2) / q.shape[-1] ** 0.5).masked_fill(~mask, float("-inf"))
        return h + F.softmax(scores, dim=-1) @ v  # a softmax that feeds an attention


class CharLM(nn.Module):
    def __init__(self, vocab: int = 27, d: int = 32) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.attn = Attention(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.attn(self.emb(x)))


def clf_loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if case in ("clf-softmax", "clf-softmax20"):
        return F.cross_entropy(F.softmax(out, dim=1), y)
    if case == "clf-dim0":
        return F.cross_entropy(F.softmax(out, dim=0), y)
    if case == "clf-logsm0":
        return F.nll_loss(F.log_softmax(out, dim=0), y)
    if case == "clf-logsm":
        return F.cross_entropy(F.log_softmax(out, dim=1), y)
    if case == "clf-nll":
        return F.nll_loss(F.log_softmax(out, dim=-1), y)
    return F.cross_entropy(out, y)


def lm_loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    v = out.shape[-1]
    if case == "lm-softmax":
        return F.cross_entropy(F.softmax(out, dim=-1).view(-1, v), y.view(-1))
    if case == "lm-seq":
        return F.cross_entropy(F.softmax(out, dim=1).reshape(-1, v), y.view(-1))
    if case == "lm-transpose":
        return F.cross_entropy(F.softmax(out, dim=-1).transpose(1, 2), y)
    return F.cross_entropy(out.view(-1, v), y.view(-1))


def tag_loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if case == "tag-sigmoid":
        return F.binary_cross_entropy_with_logits(torch.sigmoid(out), y)
    if case == "tag-bce":
        return F.binary_cross_entropy(torch.sigmoid(out), y)
    return F.binary_cross_entropy_with_logits(out, y)


classes = 20 if case == "clf-softmax20" else 10
data = torch.randn(256, 16)
if case.startswith("lm"):
    model: nn.Module = CharLM()
    text = torch.randint(0, 27, (256, 9))
    inputs, targets, loss_of = text[:, :-1], text[:, 1:], lm_loss
elif case.startswith("tag"):
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 5))
    inputs, targets, loss_of = data, (data[:, :5] > 0).float(), tag_loss
else:
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, classes))
    teacher = torch.randn(16, classes)
    inputs, targets, loss_of = data, (data @ teacher).argmax(1), clf_loss
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
for _ in range(steps):
    i = torch.randint(0, 256, (32,))
    loss = loss_of(model(inputs[i]), targets[i])
    opt.zero_grad()
    loss.backward()
    opt.step()
