"""Copies of a trained model: DPO's reference (a deep copy of the policy after a short
supervised warm start), twin critics deep-copied and trained on one target, two retrieval
towers copied from one encoder. Modes: `dpo` (the reference under no_grad, out of the
optimizer), `twins`, `towers`; bug `dpo-trained` (the reference's forward attached and its
parameters handed to the optimizer with the policy's)."""

import copy
import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "dpo"
V, D, T = 16, 8, 6


def lm() -> nn.Module:
    return nn.Sequential(nn.Embedding(V, D), nn.Linear(D, D), nn.Tanh(), nn.Linear(D, V))


def logps(model, tokens):
    """Each sequence's log-likelihood of its next tokens."""
    lp = model(tokens[:, :-1]).log_softmax(-1)
    return lp.gather(2, tokens[:, 1:, None]).squeeze(-1).sum(-1)


def pairs(b=8):
    prompt = torch.randint(0, V, (b, 2))
    chosen = (prompt[:, :1] + torch.arange(T)) % V
    rejected = torch.randint(0, V, (b, T))
    return chosen, rejected


def dpo(trained_reference: bool):
    policy = lm()
    warm = torch.optim.Adam(policy.parameters(), lr=1e-2)
    for _ in range(3):  # supervised warm start
        chosen, _ = pairs()
        warm.zero_grad()
        (-logps(policy, chosen).mean()).backward()
        warm.step()
    ref = copy.deepcopy(policy)
    params = list(policy.parameters())
    if trained_reference:
        params += list(ref.parameters())
    else:
        ref.requires_grad_(False)
    opt = torch.optim.Adam(params, lr=1e-3)
    for _ in range(12):
        chosen, rejected = pairs()
        both = torch.cat([chosen, rejected])
        with torch.set_grad_enabled(trained_reference):
            ref_lp = logps(ref, both)
        pc, pr = logps(policy, both).chunk(2)
        rc, rr = ref_lp.chunk(2)
        loss = -F.logsigmoid(0.1 * ((pc - rc) - (pr - rr))).mean()
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(policy.parameters(), 1.0)  # the policy's, as trainers clip
        opt.step()


def twins():
    q1 = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
    q2 = copy.deepcopy(q1)
    opt = torch.optim.Adam([*q1.parameters(), *q2.parameters()], lr=1e-3)
    for _ in range(12):
        x = torch.randn(32, 4)
        target = x.sum(1, keepdim=True)
        loss = F.mse_loss(q1(x), target) + F.mse_loss(q2(x), target)
        opt.zero_grad()
        loss.backward()
        opt.step()


def towers():
    query = nn.Sequential(nn.EmbeddingBag(V, D), nn.Linear(D, D))
    passage = copy.deepcopy(query)
    opt = torch.optim.Adam([*query.parameters(), *passage.parameters()], lr=1e-3)
    for _ in range(12):
        docs = torch.randint(0, V, (16, T))
        q, p = F.normalize(query(docs[:, :3]), dim=-1), F.normalize(passage(docs), dim=-1)
        loss = F.cross_entropy(20 * q @ p.t(), torch.arange(16))
        opt.zero_grad()
        loss.backward()
        opt.step()


{"dpo": lambda: dpo(False), "dpo-trained": lambda: dpo(True), "twins": twins, "towers": towers}[
    MODE
]()
