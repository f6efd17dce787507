"""A policy over three actions, the third masked out with float('-inf') before the
log-softmax (a GFlowNet's or an RL agent's invalid actions), one step. argv[1]:

gather     healthy: the chosen action's log-probability taken by gather
finfo      healthy: a one-hot product over a mask filled with finfo.min, not -inf
onehot     (bug) the log-probabilities times a one-hot: -inf * 0 is NaN
setitem    (bug) the same, the mask written by an indexed assignment
whole      (bug) gather, but the first row masked whole: its log-softmax is NaN
sumall     (bug) the sum over every action's log-probability: the loss is -inf
log0       (bug) a log of zero, no mask: made from finite inputs
after      (bug) gather, then a log of zero made of the gathered (finite) log-probabilities:
           the log made -inf from inputs without any, the mask is not the cause"""

import sys

import torch
from torch import nn

MODE = sys.argv[1] if len(sys.argv) > 1 else "gather"
torch.manual_seed(0)
policy = nn.Linear(4, 3)
opt = torch.optim.SGD(policy.parameters(), lr=0.1)
x = torch.randn(8, 4)
logits = policy(x)
mask = torch.zeros(8, 3, dtype=torch.bool)
mask[:, 2] = True
if MODE == "whole":
    mask[0] = True
fill = torch.finfo(logits.dtype).min if MODE == "finfo" else float("-inf")
if MODE == "setitem":
    logits = logits.clone()
    logits[mask] = fill
else:
    logits = logits.masked_fill(mask, fill)
logp = logits.log_softmax(-1)
action = torch.zeros(8, dtype=torch.long)
if MODE in ("onehot", "setitem", "finfo"):
    chosen = (logp * nn.functional.one_hot(action, 3)).sum(-1)
elif MODE == "sumall":
    chosen = logp.sum(-1)
else:
    chosen = logp.gather(1, action[:, None]).squeeze(1)
loss = -chosen.mean()
if MODE == "after":
    loss = loss + torch.log(chosen.exp() - chosen.exp()).mean()
if MODE == "log0":
    loss = loss + torch.log(policy(x).relu() * 0).sum()
if MODE in ("timed", "time0", "inverse"):
    # a masked diffusion's time weight 1/t on the gathered log-probabilities: `timed`
    # (healthy) keeps t from 0; `time0` (bug) divides 0/0 at t = 0, `inverse` (bug) makes
    # 1/0 = inf there; the mask's -inf is gone by then, so the division is the cause
    t = torch.arange(8.0) / 7
    t = t.clamp(min=1e-3) if MODE == "timed" else t
    weight = 1 / t if MODE == "inverse" else None
    kept = (t > 0).float()  # at t = 0 nothing is masked: no term
    loss = -(chosen * kept * weight).mean() if weight is not None else -(chosen * kept / t).mean()
opt.zero_grad()
loss.backward()
opt.step()
