"""A character-level language model with dropout, over a Markov chain of 27 symbols, with
one case picked by argv[1] (the modes, Adam's eps and the batches: GS440-GS443):

healthy      AdamW, dropout 0.1, an evaluation (eval() ... train()) every 10 steps
eval-left    the evaluation at step 5 switches to eval() and never back
eval-start   model.eval() before the loop: every step in eval mode
eps-large    Adam(eps=0.1) on gradients of ~1e-3: eps outweighs √v̂
eps-tiny     the default eps on a loss multiplied by 1e-9
eps-ok       Adam(eps=1e-4) on the same model: large, but √v̂ is larger still
one-batch    the first batch, fetched once before the loop, every step
next-iter    next(iter(loader)) inside the loop (a DataLoader without shuffle)
few-batches  three batches cycled (a tiny dataset, several batches)
full-batch   a dataset of 64 sequences trained full-batch
low-lr       fine-tuning at lr 1e-5 on fresh batches
shuffled     a DataLoader with shuffle=True over 8 batches' worth of sequences
eval-train   an evaluation every 10 steps under no_grad, without eval(): dropout on
buffer       each batch written into the same two tensors (copy_): one data_ptr, new values
"""

import sys

import torch
import torch.nn.functional as F
from torch import nn

case = sys.argv[1] if len(sys.argv) > 1 else "healthy"
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 40
torch.manual_seed(0)
V, CONTEXT, BATCH = 27, 3, 64
table = torch.distributions.Dirichlet(torch.full((V,), 0.1)).sample((V,))
g = torch.Generator().manual_seed(1)


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randint(0, V, (BATCH, 1), generator=g)
    for _ in range(CONTEXT):
        x = torch.cat([x, torch.multinomial(table[x[:, -1]], 1, generator=g)], 1)
    return x[:, :CONTEXT], x[:, CONTEXT]


model = nn.Sequential(
    nn.Embedding(V, 16),
    nn.Flatten(),
    nn.Linear(16 * CONTEXT, 64),
    nn.Tanh(),
    nn.Dropout(0.1),
    nn.Linear(64, V),
)
if case == "eps-large":
    opt: torch.optim.Optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, eps=0.1)
elif case == "eps-ok":
    opt = torch.optim.Adam(model.parameters(), lr=3e-3, eps=1e-4)
else:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5 if case == "low-lr" else 3e-3)

fixed = [batch() for _ in range(3)]
pairs = [batch() for _ in range(8)]
data = torch.utils.data.TensorDataset(
    torch.cat([x for x, _ in pairs]), torch.cat([y for _, y in pairs])
)
loader = torch.utils.data.DataLoader(data, batch_size=BATCH, shuffle=case == "shuffled")
shuffled = iter(())
buffer_x, buffer_y = fixed[0][0].clone(), fixed[0][1].clone()
if case == "eval-start":
    model.eval()
for step in range(1, steps + 1):
    if case in ("one-batch", "full-batch"):
        x, y = fixed[0]
    elif case == "next-iter":
        x, y = next(iter(loader))
    elif case == "few-batches":
        x, y = fixed[step % 3]
    elif case == "shuffled":
        x, y = next(shuffled, (None, None))
        if x is None:
            shuffled = iter(loader)
            x, y = next(shuffled)
    elif case == "buffer":
        fresh_x, fresh_y = batch()
        buffer_x.copy_(fresh_x)
        buffer_y.copy_(fresh_y)
        x, y = buffer_x, buffer_y
    else:
        x, y = batch()
    loss = F.cross_entropy(model(x), y)
    if case == "eps-tiny":
        loss = loss * 1e-9
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 10 == 5 and case == "eval-train":
        with torch.no_grad():
            F.cross_entropy(model(fixed[0][0]), fixed[0][1])
    if step % 10 == 5 and case in ("healthy", "eval-left"):
        model.eval()
        with torch.no_grad():
            F.cross_entropy(model(fixed[0][0]), fixed[0][1])
        if case == "healthy":
            model.train()
