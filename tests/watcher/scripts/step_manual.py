# Updates by hand, no optimizer. data: pytorch/examples word_language_model's default
# (clip_grad_norm_ then p.data.add_(p.grad, alpha=-lr)); sub: `p -= lr * p.grad` under
# no_grad, grads zeroed right after; add: p.add_ under no_grad, grads set to None after;
# copy: p.copy_; accumulate: 3 backward per update; none: backward only, never an update.
import argparse

import step_oracle as oracle
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--case", required=True)
parser.add_argument("--out", required=True)
args = parser.parse_args()
torch.manual_seed(0)


class RNNModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Embedding(20, 8)
        self.rnn = nn.GRU(8, 8, batch_first=True)
        self.decoder = nn.Linear(8, 20)

    def forward(self, x):
        out, _ = self.rnn(self.encoder(x))
        return self.decoder(out)


model = RNNModel()
named = list(model.named_parameters())
case, lr = args.case, 0.5
seen = []
for _step in range(6):
    micro = 3 if case == "accumulate" else 1
    total = 0.0
    if case == "data":
        model.zero_grad()
    for _m in range(micro):
        tokens = torch.randint(0, 20, (4, 7))
        out = model(tokens[:, :-1])
        loss = nn.functional.cross_entropy(out.reshape(-1, 20), tokens[:, 1:].reshape(-1))
        loss.backward()
        total += loss.item()
    norms = oracle.grads(named)
    before = oracle.weights(named)
    clip = None
    if case == "data":
        clip = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25).item()
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
    elif case == "sub":
        with torch.no_grad():
            for p in model.parameters():
                p -= lr * p.grad
        model.zero_grad(set_to_none=False)
    elif case in ("add", "accumulate"):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(p.grad, alpha=-lr)
                p.grad = None
    elif case == "copy":
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p - lr * p.grad)
        model.zero_grad()
    else:  # none: look, never touch
        model.zero_grad()
        continue
    seen.append(
        {
            "loss": total,
            "params": norms,
            "grad_norm": oracle.total(norms.values()),
            "calls": micro,
            "update": oracle.update(before, named),
            "clip": clip,
        }
    )
oracle.dump(args.out, seen)
