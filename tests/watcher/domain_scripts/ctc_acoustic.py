"""A CTC acoustic model: a BiLSTM over feature frames, batch-first logits turned into the
(T, N, C) log-probabilities nn.CTCLoss wants (blank 0, zero_infinity=True), Adam with
clipping. argv: bugs "softmax" (probabilities in place of log-probabilities), "wrong-dim"
(log_softmax over the time axis of the batch-first logits)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else ""
T, N, C, L = 20, 4, 6, 4
lstm = nn.LSTM(8, 16, batch_first=True, bidirectional=True)
head = nn.Linear(32, C)
opt = torch.optim.Adam([*lstm.parameters(), *head.parameters()], lr=1e-3)
ctc = nn.CTCLoss(blank=0, zero_infinity=True)

for _ in range(6):
    x = torch.randn(N, T, 8)
    targets = torch.randint(1, C, (N, L))
    lengths = torch.full((N,), T)
    target_lengths = torch.randint(2, L + 1, (N,))
    logits = head(lstm(x)[0])  # (N, T, C)
    if MODE == "softmax":
        log_probs = F.softmax(logits, dim=-1).transpose(0, 1)
    elif MODE == "wrong-dim":
        log_probs = F.log_softmax(logits, dim=1).transpose(0, 1)
    else:
        log_probs = F.log_softmax(logits, dim=-1).transpose(0, 1)
    loss = ctc(log_probs, targets, lengths, target_lengths)
    opt.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_([*lstm.parameters(), *head.parameters()], 5.0)
    opt.step()
