"""REINFORCE for a routing problem with a greedy-rollout baseline (Kool et al.'s Attention
Model, shrunk): a pointer decoder that masks visited nodes with -inf samples a tour, the
loss is (cost - baseline) * log-likelihood, and the baseline is a frozen copy of the
policy, decoded greedily under no_grad and replaced by load_state_dict when the policy
beats it on an evaluation set. The first step's context is a learned placeholder, read
as torch.where(step == 0, placeholder, last node). argv: "rollout" (the default,
healthy), "multistart" (POMO: every node starts one rollout, the baseline is the mean over
starts; the placeholder is never chosen), bug "bl-in-opt" (the baseline's parameters
handed to the optimizer with the policy's, and no replacement in the run: no gradient
reaches them, the optimizer skips them, nothing moves them)."""

import copy
import sys

import torch
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "rollout"
N, D, B = 6, 16, 16


class Pointer(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(2, D)
        self.enc = nn.Sequential(nn.Linear(D, D), nn.ReLU(), nn.Linear(D, D))
        self.query = nn.Linear(2 * D, D, bias=False)
        self.placeholder = nn.Parameter(torch.rand(D))

    def forward(self, xy, greedy=False, first=None):
        h = self.enc(self.embed(xy))
        ar = torch.arange(xy.size(0))
        visited = torch.zeros(xy.shape[:2], dtype=torch.bool)
        last, tour, ll = h.mean(1), [], torch.zeros(xy.size(0))
        if first is not None:  # POMO: each rollout's first node is given
            visited[ar, first] = True
            last, tour = h[ar, first], [first]
        for step in range(len(tour), N):
            ctx = torch.where(torch.tensor(step == 0), self.placeholder.expand_as(last), last)
            q = self.query(torch.cat([h.mean(1), ctx], -1))
            logits = 10 * torch.tanh((h @ q[..., None]).squeeze(-1) / D**0.5)
            logp = logits.masked_fill(visited, float("-inf")).log_softmax(-1)
            pick = logp.argmax(-1) if greedy else logp.exp().multinomial(1).squeeze(-1)
            ll = ll + logp[ar, pick]
            visited = visited.clone()
            visited[ar, pick] = True
            last = h[ar, pick]
            tour.append(pick)
        return torch.stack(tour, 1), ll


def length(xy, tour):
    pts = xy.gather(1, tour[..., None].expand(-1, -1, 2))
    return (pts - pts.roll(-1, 1)).norm(dim=-1).sum(1)


def greedy_cost(net, xy):
    net.eval()
    with torch.no_grad():
        return length(xy, net(xy, greedy=True)[0])


policy = Pointer()
baseline = copy.deepcopy(policy).eval()
params = list(policy.parameters())
if MODE == "bl-in-opt":
    params += list(baseline.parameters())
opt = torch.optim.Adam(params, lr=1e-3)
held_out = torch.rand(64, N, 2)
if MODE == "multistart":
    for _ in range(12):
        xy = torch.rand(B, N, 2).repeat_interleave(N, 0)
        tour, ll = policy(xy, first=torch.arange(N).repeat(B))
        reward = -length(xy, tour).view(B, N)
        loss = -((reward - reward.mean(1, keepdim=True)) * ll.view(B, N)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    sys.exit(0)
for _epoch in range(2):
    for _ in range(6):
        xy = torch.rand(B, N, 2)
        policy.train()
        tour, ll = policy(xy)
        cost = length(xy, tour)
        loss = ((cost - greedy_cost(baseline, xy)) * ll).mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        opt.step()
    better = greedy_cost(policy, held_out).mean() < greedy_cost(baseline, held_out).mean()
    if MODE == "rollout" and better:
        baseline.load_state_dict(policy.state_dict())
