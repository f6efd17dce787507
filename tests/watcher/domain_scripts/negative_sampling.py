"""Neural collaborative filtering (He et al. 2017, NeuMF) trained on implicit feedback with
sampled negatives: each step's observed (user, item) pairs are the positives, each paired
with 4 items drawn at random as negatives, and the labels are laid out to match,
cat([ones(n), zeros(4n)]): the same tensor at every step while the pairs are new.

argv: the number of steps (12 by default).
"""

import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 12
USERS, ITEMS, K, B = 300, 400, 8, 32
user_taste, item_traits = torch.randn(USERS, 4), torch.randn(ITEMS, 4)


class NeuMF(nn.Module):
    def __init__(self):
        super().__init__()
        self.user_gmf, self.item_gmf = nn.Embedding(USERS, K), nn.Embedding(ITEMS, K)
        self.user_mlp, self.item_mlp = nn.Embedding(USERS, K), nn.Embedding(ITEMS, K)
        self.mlp = nn.Sequential(nn.Linear(2 * K, 16), nn.ReLU(), nn.Linear(16, 8), nn.ReLU())
        self.out = nn.Linear(K + 8, 1)

    def forward(self, u, i):
        gmf = self.user_gmf(u) * self.item_gmf(i)
        mlp = self.mlp(torch.cat([self.user_mlp(u), self.item_mlp(i)], 1))
        return self.out(torch.cat([gmf, mlp], 1)).squeeze(1)


model = NeuMF()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for _ in range(STEPS):
    u, i = torch.randint(0, USERS, (B * 8,)), torch.randint(0, ITEMS, (B * 8,))
    liked = (user_taste[u] * item_traits[i]).sum(1) > 1.0
    u, i = u[liked][:B], i[liked][:B]
    users = torch.cat([u, u.repeat(4)])
    items = torch.cat([i, torch.randint(0, ITEMS, (4 * len(u),))])
    labels = torch.cat([torch.ones(len(u)), torch.zeros(4 * len(u))])
    loss = F.binary_cross_entropy_with_logits(model(users, items), labels)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("final", loss.item())
