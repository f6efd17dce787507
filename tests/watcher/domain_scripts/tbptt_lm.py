"""An LSTM language model trained by truncated backpropagation through time, as PyTorch's
word_language_model example: the hidden state carried from one chunk to the next and
repackaged (detached) before each, the update made by hand (SGD, lr 20, clip 0.25).
argv: bug "attached" (the state carried without the detach: the second backward reaches
the first chunk's graph, which the first backward freed)."""

import sys

import torch
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else ""
V, H, BPTT, B = 20, 16, 8, 4
data = torch.randint(0, V, (BPTT * 6 + 1, B))
embed, rnn, head = nn.Embedding(V, H), nn.LSTM(H, H), nn.Linear(H, V)
params = [*embed.parameters(), *rnn.parameters(), *head.parameters()]
hidden = (torch.zeros(1, B, H), torch.zeros(1, B, H))

for i in range(0, BPTT * 6, BPTT):
    x, y = data[i : i + BPTT], data[i + 1 : i + 1 + BPTT]
    if MODE != "attached":
        hidden = tuple(h.detach() for h in hidden)
    for p in params:
        p.grad = None
    out, hidden = rnn(embed(x), hidden)
    loss = nn.functional.cross_entropy(head(out).view(-1, V), y.reshape(-1))
    loss.backward()
    nn.utils.clip_grad_norm_(params, 0.25)
    with torch.no_grad():
        for p in params:
            p.add_(p.grad, alpha=-20.0)
