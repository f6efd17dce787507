# checkpointing (reentrant and not), in-place ReLU, the user's own tensor/module hooks,
# and optionally torch.compile; counts written to --out
import argparse
import json

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

parser = argparse.ArgumentParser()
parser.add_argument("--compile", action="store_true")
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--out", required=True)
args = parser.parse_args()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Sequential(nn.Linear(8, 16), nn.ReLU(inplace=True))
        self.b = nn.Sequential(nn.Linear(16, 16), nn.ReLU(inplace=True))
        self.head = nn.Linear(16, 1)

    def forward(self, x):
        h = checkpoint(self.a, x, use_reentrant=True)
        h = checkpoint(self.b, h, use_reentrant=False)
        return self.head(h)


torch.manual_seed(0)
model = Net()
counts = {"tensor_hook": 0, "module_hook": 0, "post_accumulate": 0}


def tensor_hook(grad):
    counts["tensor_hook"] += 1


def module_hook(module, grad_in, grad_out):
    counts["module_hook"] += 1


def post_accumulate(param):
    counts["post_accumulate"] += 1


model.head.weight.register_hook(tensor_hook)
model.head.weight.register_post_accumulate_grad_hook(post_accumulate)
if not args.compile:
    model.head.register_full_backward_hook(module_hook)
net = torch.compile(model, backend="aot_eager") if args.compile else model
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _step in range(args.steps):
    x = torch.randn(4, 8, requires_grad=True)
    loss = net(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
with open(args.out, "w") as f:
    json.dump(counts, f)
