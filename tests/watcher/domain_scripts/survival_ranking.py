"""Losses whose floor is neither 0 nor known, over batch-dependent sets: DeepSurv's Cox
partial likelihood (pycox's cox_ph_loss: the batch sorted by time descending, the risk set
a log-cumsum-exp, Breslow ties, divided by the batch's events, a batch with none giving 0)
and listwise ranking losses as allRank writes them on slates padded with label -1, the
padded scores masked to -inf (ListNet's softmax cross-entropy, ListMLE's Plackett-Luce
likelihood). Modes: `cox`, `cox-ties` (times rounded to quarters, 20% events, batches of
16), `listnet`, `listmle`."""

import sys

import torch
from torch import nn
from torch.nn import functional as F

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "cox"
PAD, EPS, SLATE = -1.0, 1e-10, 12


def cox_ph_loss(log_h: torch.Tensor, time: torch.Tensor, event: torch.Tensor) -> torch.Tensor:
    order = time.sort(descending=True)[1]
    log_h, event = log_h[order], event[order]
    gamma = log_h.max()
    log_cumsum_h = log_h.sub(gamma).exp().cumsum(0).add(1e-7).log().add(gamma)
    return -log_h.sub(log_cumsum_h).mul(event).sum().div(event.sum().clamp_min(1.0))


def listwise(scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    mask = labels == PAD
    if MODE == "listnet":
        true = F.softmax(labels.masked_fill(mask, float("-inf")), dim=1)
        pred = F.softmax(scores.masked_fill(mask, float("-inf")), dim=1)
        return torch.mean(-torch.sum(true * torch.log(pred + EPS), dim=1))
    labels_sorted, idx = labels.sort(descending=True, dim=-1)
    preds = scores.gather(1, idx).masked_fill(labels_sorted == PAD, float("-inf"))
    preds = preds - preds.max(dim=1, keepdim=True)[0]
    cumsums = preds.exp().flip(dims=[1]).cumsum(dim=1).flip(dims=[1])
    observed = (torch.log(cumsums + EPS) - preds).masked_fill(labels_sorted == PAD, 0.0)
    return observed.sum(dim=1).mean()


def survival_batch(n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x = torch.randn(n, 8)
    t_event = torch.distributions.Exponential(torch.exp(x @ BETA)).sample()
    t_cens = torch.distributions.Exponential(torch.full((n,), 4.0 if MODE == "cox-ties" else 0.5))
    censor = t_cens.sample()
    time = torch.minimum(t_event, censor)
    if MODE == "cox-ties":
        time = (time * 4).round() / 4
    return x, time, (t_event <= censor).float()


def ranking_batch(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(n, SLATE, 8)
    labels = torch.bucketize(x @ BETA + 0.5 * torch.randn(n, SLATE), torch.tensor([-1.0, 0.0, 1.0]))
    labels = labels.float()
    lengths = torch.randint(3, SLATE + 1, (n, 1))
    return x, labels.masked_fill(torch.arange(SLATE) >= lengths, PAD)


BETA = torch.randn(8) * 0.7
net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1))
opt = torch.optim.Adam(net.parameters(), lr=1e-2 if MODE.startswith("cox") else 3e-3)
for _ in range(40):
    if MODE.startswith("cox"):
        x, time, event = survival_batch(16 if MODE == "cox-ties" else 128)
        loss = cox_ph_loss(net(x).squeeze(-1), time, event)
    else:
        x, labels = ranking_batch(32)
        loss = listwise(net(x).squeeze(-1), labels)
    opt.zero_grad()
    loss.backward()
    opt.step()
