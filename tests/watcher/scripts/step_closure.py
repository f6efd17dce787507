# optimizer.step(closure): LBFGS on an LSTM (pytorch/examples time_sequence_prediction),
# SGD and Adam given a closure, a Lightning-like closure that clips after the inner
# one, and an optimizer that clips inside its step after the closure. Writes what each
# step used (first evaluation's loss and gradients) to --out.
import argparse
import typing

import step_oracle as oracle
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--case", required=True)
parser.add_argument("--out", required=True)
args = parser.parse_args()
torch.manual_seed(0)


class Sequence(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm1 = nn.LSTMCell(1, 8)
        self.linear = nn.Linear(8, 1)

    def forward(self, x):
        h = c = torch.zeros(x.size(0), 8)
        outputs = []
        for t in range(x.size(1)):
            h, c = self.lstm1(x[:, t : t + 1], (h, c))
            outputs.append(self.linear(h))
        return torch.cat(outputs, dim=1)


wave = torch.sin(torch.arange(0, 13).float() / 2 + torch.rand(4, 1) * 6)
inputs, target = wave[:, :-1], wave[:, 1:]
model = Sequence()
named = list(model.named_parameters())
params = [p for _, p in named]
case = args.case


class ClippingSGD(torch.optim.SGD):
    """An optimizer that evaluates the closure, then clips, inside its own step."""

    clipped: typing.ClassVar[list] = []

    def step(self, closure=None):
        with torch.enable_grad():
            loss = closure()
        self.clipped.append(torch.nn.utils.clip_grad_norm_(params, 0.05).item())
        super().step()
        return loss


if case == "lbfgs":
    opt = torch.optim.LBFGS(params, lr=0.8, max_iter=4)
elif case == "inside":
    opt = ClippingSGD(params, lr=0.1)
elif case in ("sgd", "lightning"):
    opt = torch.optim.SGD(params, lr=0.1, momentum=0.9)
else:
    opt = torch.optim.Adam(params, lr=0.01)
seen, evaluations = [], [0]
for _step in range(5):
    first = {}

    def closure(first=first):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(inputs), target)
        loss.backward()
        evaluations[0] += 1
        if not first:
            first.update(loss=loss.item(), params=oracle.grads(named))
        return loss

    def lightning(first=first):  # Lightning's precision plugin: the closure, then clip, inside step
        out = closure(first)
        if "clip" not in first:
            first["clip"] = torch.nn.utils.clip_grad_norm_(params, 0.05).item()
        else:
            torch.nn.utils.clip_grad_norm_(params, 0.05)
        return out

    before = oracle.weights(named)
    if case == "lbfgs":
        opt.step(closure)
    elif case == "sgd":
        opt.step(closure)
    elif case == "adam":
        opt.step(closure=closure)
    elif case == "inside":
        opt.step(closure)
        first["clip"] = ClippingSGD.clipped[-1]
    else:
        opt.step(closure=lightning)
    first["update"] = oracle.update(before, named)
    first["grad_norm"] = oracle.total(first["params"].values())
    seen.append(first)
oracle.dump(args.out, seen, backward_calls=evaluations[0])
