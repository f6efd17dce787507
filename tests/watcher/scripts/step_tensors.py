# The autograd tutorial's loop: no nn.Module, no optimizer, leaf tensors updated by hand
# and their gradients zeroed in place right after.
import argparse

import step_oracle as oracle
import torch

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
args = parser.parse_args()
torch.manual_seed(0)
w = torch.randn(3, 1, requires_grad=True)
b = torch.zeros(1, requires_grad=True)
named = [("w", w), ("b", b)]
seen = []
for _step in range(5):
    x = torch.randn(8, 3)
    loss = ((x @ w + b) - x.sum(1, keepdim=True)).pow(2).mean()
    loss.backward()
    norms = oracle.grads(named)
    before = oracle.weights(named)
    with torch.no_grad():
        w -= 0.1 * w.grad
        b -= 0.1 * b.grad
        w.grad.zero_()
        b.grad.zero_()
    seen.append(
        {
            "loss": loss.item(),
            "params": norms,
            "grad_norm": oracle.total(norms.values()),
            "update": oracle.update(before, named),
        }
    )
oracle.dump(args.out, seen)
