"""Opacus's documented recipes on a tiny classifier, healthy or with one planted bug.

argv[1] picks the case:
  bmm       make_private (hooks), Adam, BatchMemoryManager: logical batches of 128 split
            into physical batches of 32, a zero_grad() before each (Opacus's CIFAR-10 loop)
  ew        the same with grad_sample_mode="ew" (Expanded Weights)
  plain     no Opacus: an accumulation of 4 micro-batches with zero_grad() inside the loop
            (the last micro-batch alone is applied: the bug)
  passthru  the same bug under an optimizer wrapper that keeps no buffer of its own
  sgd       make_private, SGD lr 0.1, one step a batch (Opacus's MNIST loop): healthy
  ghost     the same with ghost clipping: the loss Opacus wraps runs two backward passes
  sgd_high  the same at lr 5 with momentum 0.9: the noise it adds swamps the weights
  empty     Poisson sampling at an expected batch of 4 (lr 0.01): some batches are empty,
            their mean loss NaN, their update the noise alone (healthy)
  nan       the same with a NaN in one sample: its batch's loss and gradients are NaN (a bug)
"""

import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

case = sys.argv[1]
torch.manual_seed(0)
x = torch.randn(512, 16)
y = (x[:, :4] @ torch.randn(4, 3)).argmax(1)
one_step_a_batch = case.startswith(("sgd", "ghost"))
loader = DataLoader(TensorDataset(x, y), batch_size=32 if one_step_a_batch else 128)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 3))
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
if case == "nan":
    x[100, 3] = float("nan")
if case in ("empty", "nan"):
    loader = DataLoader(TensorDataset(x[:256], y[:256]), batch_size=4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
if case == "ghost":
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
if case.startswith("sgd"):
    high = case == "sgd_high"
    optimizer = torch.optim.SGD(model.parameters(), lr=5.0 if high else 0.1, momentum=0.9 * high)
criterion = nn.CrossEntropyLoss()


class PassThrough(torch.optim.Optimizer):
    """A wrapper whose step and zero_grad hand over to the optimizer it holds."""

    def __init__(self, inner):
        self.inner = inner

    param_groups = property(lambda self: self.inner.param_groups)
    state = property(lambda self: self.inner.state)
    defaults = property(lambda self: self.inner.defaults)

    def zero_grad(self, set_to_none=True):
        self.inner.zero_grad(set_to_none)

    def step(self, closure=None):
        return self.inner.step(closure)


def accumulate(opt):
    for _ in range(2):
        for xb, yb in loader:
            for xm, ym in zip(xb.split(32), yb.split(32), strict=True):
                opt.zero_grad()  # the bug: inside the accumulation loop
                (criterion(model(xm), ym) / 4).backward()
            opt.step()


if case in ("plain", "passthru"):
    accumulate(optimizer if case == "plain" else PassThrough(optimizer))
    sys.exit(0)

from opacus import PrivacyEngine  # noqa: E402
from opacus.utils.batch_memory_manager import BatchMemoryManager  # noqa: E402

private = PrivacyEngine().make_private(
    module=model,
    optimizer=optimizer,
    data_loader=loader,
    noise_multiplier=0.5 if case in ("empty", "nan") else 0.8,
    max_grad_norm=1.0,
    grad_sample_mode={"ew": "ew", "ghost": "ghost"}.get(case, "hooks"),
    **({"criterion": criterion} if case == "ghost" else {}),
)
if case == "ghost":
    model, optimizer, criterion, loader = private
else:
    model, optimizer, loader = private
if case.startswith("sgd") or case in ("empty", "nan", "ghost"):
    for _ in range(2 if case in ("empty", "nan") else 3):
        for xb, yb in loader:
            optimizer.zero_grad()
            criterion(model(xb), yb).backward()
            optimizer.step()
    sys.exit(0)
for _ in range(2):
    physical = BatchMemoryManager(
        data_loader=loader, max_physical_batch_size=32, optimizer=optimizer
    )
    with physical as batches:
        for xb, yb in batches:
            optimizer.zero_grad()
            criterion(model(xb), yb).backward()
            optimizer.step()
