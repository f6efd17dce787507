"""A character-level language model trained on a Markov chain over 27 symbols, with one
seeded bug picked by argv[1] (the classes watch must name by meaning, not threshold):

healthy       AdamW, warm-up, clip 1.0
negated       loss = -cross_entropy: the run maximises it
decay         AdamW(weight_decay=100): lr × wd erases the weights
lr100         the stock recipe at 100× its learning rate (warm-up to 0.3)
frozen        the embedding frozen with requires_grad_(False) but left in the optimizer
zero-between  optimizer.zero_grad() between backward() and step()
no-zero-adam  zero_grad() missing, Adam
no-zero-sgd   zero_grad() missing, SGD with momentum 0.9 (blows up within ~40 steps)
smoothing     label_smoothing=0.1, healthy
accum         4 micro-batches of loss / 4 per step, healthy
ascent        loss = -cross_entropy with AdamW(maximize=True): a deliberate double negation, healthy
maximize      plain cross_entropy with AdamW(maximize=True): the run maximises it
manual        hand-written SGD updates (p.data.add_), healthy
manual-carry  hand-written SGD updates with the gradients never reset
"""

import sys

import torch
import torch.nn.functional as F
from torch import nn

bug = sys.argv[1] if len(sys.argv) > 1 else "healthy"
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 120
torch.manual_seed(0)
V, CONTEXT, BATCH = 27, 3, 64

# a sparse random Markov chain: structure a small model can learn below ln 27
table = torch.distributions.Dirichlet(torch.full((V,), 0.1)).sample((V,))
g = torch.Generator().manual_seed(1)


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randint(0, V, (BATCH, 1), generator=g)
    for _ in range(CONTEXT):
        x = torch.cat([x, torch.multinomial(table[x[:, -1]], 1, generator=g)], 1)
    return x[:, :CONTEXT], x[:, CONTEXT]


model = nn.Sequential(
    nn.Embedding(V, 16), nn.Flatten(), nn.Linear(16 * CONTEXT, 64), nn.Tanh(), nn.Linear(64, V)
)
lr = {"lr100": 0.3, "no-zero-sgd": 0.05}.get(bug, 3e-3)
if bug == "no-zero-sgd":
    opt: torch.optim.Optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
elif bug == "no-zero-adam":
    opt = torch.optim.Adam(model.parameters(), lr=lr)
else:
    opt = torch.optim.AdamW(
        model.parameters(),
        lr=lr,
        weight_decay=100.0 if bug == "decay" else 0.01,
        maximize=bug in ("ascent", "maximize"),
    )
if bug == "frozen":
    model[0].requires_grad_(False)
warmup = 20

for it in range(steps):
    for group in opt.param_groups:
        group["lr"] = lr * min(1.0, (it + 1) / warmup)
    if bug not in ("zero-between", "no-zero-adam", "no-zero-sgd", "manual-carry"):
        opt.zero_grad(set_to_none=True)
    micro = 4 if bug == "accum" else 1
    for _ in range(micro):
        x, y = batch()
        loss = F.cross_entropy(model(x), y, label_smoothing=0.1 if bug == "smoothing" else 0.0)
        if bug in ("negated", "ascent"):
            loss = -loss
        (loss / micro).backward()
    if bug == "zero-between":
        opt.zero_grad()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    if bug.startswith("manual"):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(p.grad, alpha=-0.5)
    else:
        opt.step()
