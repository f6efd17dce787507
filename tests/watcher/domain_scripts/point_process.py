"""A neural temporal point process (RMTPP / neural Hawkes): a GRU reads each event's mark
(nn.Embedding) and gap; the state before event i, the encoder's output moved one position
later, scores event i's mark and time with a softplus intensity (log-intensity at the
event minus the integrated intensity by Monte Carlo). Modes: `cat` (the shift written
`cat([h0, h[:, :-1]], 1)`), `pad` (`F.pad(h, (0, 0, 1, 0))[:, :-1]`); bug `peek` (the
state after event i scores it: the mark it is trained to predict was read)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "cat"
B, L, H, K, MC, STEPS = 8, 12, 8, 3, 4, 6


def sequences():
    """Marks that mostly follow their predecessor's successor, each with its own rate."""
    marks = torch.zeros(B, L, dtype=torch.long)
    marks[:, 0] = torch.randint(0, K, (B,))
    for i in range(1, L):
        follow = (marks[:, i - 1] + 1) % K
        marks[:, i] = torch.where(torch.rand(B) < 0.8, follow, torch.randint(0, K, (B,)))
    gaps = torch.distributions.Exponential(torch.tensor([4.0, 1.0, 0.5])[marks]).sample()
    return gaps, marks


class PointProcess(nn.Module):
    def __init__(self):
        super().__init__()
        self.mark = nn.Embedding(K, H)
        self.rnn = nn.GRU(H + 1, H, batch_first=True)
        self.base = nn.Linear(H, K)
        self.decay = nn.Linear(H, K)

    def intensity(self, state, elapsed):
        return F.softplus(self.base(state) + self.decay(state) * elapsed.unsqueeze(-1))

    def forward(self, gaps, marks):
        h, _ = self.rnn(torch.cat([self.mark(marks), gaps.unsqueeze(-1)], -1))
        if MODE == "pad":
            before = F.pad(h, (0, 0, 1, 0))[:, :-1]
        elif MODE == "peek":
            before = h
        else:
            before = torch.cat([torch.zeros(B, 1, H), h[:, :-1]], 1)
        at_events = self.intensity(before, gaps).gather(-1, marks.unsqueeze(-1)).squeeze(-1)
        elapsed = torch.rand(B, L, MC) * gaps.unsqueeze(-1)
        between = self.intensity(before.unsqueeze(2).expand(-1, -1, MC, -1), elapsed)
        integral = between.sum(-1).mean(-1) * gaps
        return -(torch.log(at_events + 1e-9) - integral).sum(-1).mean() / L


model = PointProcess()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for _ in range(STEPS):
    loss = model(*sequences())
    opt.zero_grad()
    loss.backward()
    opt.step()
