"""GS413 on parameters whose module ran only inside a custom autograd.Function's forward,
where grad mode is off, and was never run again with gradients on: torch.utils.checkpoint
with use_reentrant=True over the raw batch (no input requires grad, so the checkpoint's
backward never runs), or a Function that runs a module in its forward and never
recomputes it. It was told as a block frozen on purpose by torch.no_grad() (information,
"fine if it is meant to stay frozen"); it is a warning that names the checkpoint or the
Function. Reentrant checkpointing past the first layer, non-reentrant checkpointing of
the raw batch and a reversible Function that recomputes in its backward stay silent, and a
block frozen by torch.no_grad() stays information. With most of the model frozen so, the
stalled loss and the head's large updates are GS413's symptoms, not an lr too high; and
inspect's GS101 for the same checkpoint advises it, not a search for a .detach()."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

import gradscope
from gradscope.findings import Severity


class Detached(torch.autograd.Function):
    """Runs `module` in its forward (grad mode off there); `recompute`: its backward reruns
    it under enable_grad and backpropagates into it, as reversible blocks do."""

    @staticmethod
    def forward(ctx, x, module, recompute):
        ctx.save_for_backward(x)
        ctx.module, ctx.recompute = module, recompute
        return module(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        x = x.detach().requires_grad_()
        if ctx.recompute:
            with torch.enable_grad():
                torch.autograd.backward(ctx.module(x), grad)
        return x.grad, None, None


class Net(nn.Module):
    def __init__(self, how: str):
        super().__init__()
        self.stem, self.body, self.head = nn.Linear(6, 8), nn.Linear(8, 8), nn.Linear(8, 3)
        self.how = how

    def forward(self, x):
        if self.how == "reentrant-raw":
            h = checkpoint(self.stem, x, use_reentrant=True)
        elif self.how == "nonreentrant-raw":
            h = checkpoint(self.stem, x, use_reentrant=False)
        elif self.how.startswith("function"):
            x = x.requires_grad_() if self.how == "function-recomputed" else x
            h = Detached.apply(x, self.stem, self.how == "function-recomputed")
        elif self.how == "no_grad":
            with torch.no_grad():
                h = self.stem(x)
        else:
            h = self.stem(x)
        if self.how == "reentrant-after-stem":
            return self.head(checkpoint(self.body, torch.relu(h), use_reentrant=True))
        return self.head(self.body(torch.relu(h)))


def _gs413(how: str):
    torch.manual_seed(0)
    model = Net(how)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    with gradscope.watch() as w:
        for _ in range(5):
            x, y = torch.randn(4, 6), torch.randint(0, 3, (4,))
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return {f.subject: f for f in w.report.findings if f.rule == "GS413"}


def test_a_reentrant_checkpoint_of_the_raw_batch_is_a_warning_that_names_it():
    found = _gs413("reentrant-raw")
    assert set(found) == {"stem.weight", "stem.bias"}
    f = found["stem.weight"]
    assert f.severity is Severity.WARNING
    assert "use_reentrant=True" in f.message and "no_grad()" not in f.message
    assert "use_reentrant=False" in f.advice and "meant to stay frozen" not in f.advice


def test_a_function_that_never_recomputes_its_module_is_named():
    f = _gs413("function-plain")["stem.weight"]
    assert f.severity is Severity.WARNING
    assert "autograd.Function Detached" in f.message
    assert "Detached.backward" in f.advice and "torch.enable_grad()" in f.advice


@pytest.mark.parametrize(
    "how", ["reentrant-after-stem", "nonreentrant-raw", "function-recomputed", "plain"]
)
def test_checkpoints_and_functions_that_recompute_are_silent(how):
    assert _gs413(how) == {}


def test_a_block_frozen_by_no_grad_stays_information():
    f = _gs413("no_grad")["stem.weight"]
    assert f.severity is Severity.INFO and "torch.no_grad()" in f.message


class Trunk(nn.Module):
    """A small CNN whose every layer is checkpointed, as ResNet memory recipes do."""

    def __init__(self, reentrant: bool):
        super().__init__()
        self.features = nn.Sequential(*_conv(3, 8), nn.MaxPool2d(2), *_conv(8, 8))
        self.fc, self.reentrant = nn.Linear(8, 4), reentrant

    def forward(self, x):
        for m in self.features:
            x = checkpoint(m, x, use_reentrant=self.reentrant)
        return self.fc(x.mean((2, 3)))


def _conv(cin, cout):
    return nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()


def _one_cycle(reentrant: bool):
    """SGD with OneCycle to lr 0.1 (a CNN recipe) on a learnable 4-class task."""
    torch.manual_seed(0)
    model, x = Trunk(reentrant), torch.randn(128, 3, 8, 8)
    y = (x[:, 0, :4].mean((1, 2)) > x[:, 1, 4:].mean((1, 2))).long()
    y = y + 2 * (x[:, 2].mean((1, 2)) > 0).long()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=60)
    with gradscope.watch() as w:
        for _ in range(60):
            idx = torch.randint(0, 128, (32,))
            loss = F.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
    return {f.rule: f for f in w.report.findings}


def test_a_trunk_that_never_learns_explains_the_stalled_loss_not_the_lr():
    """Only the head learns: its updates are large against its weights and the loss
    stalls at a uniform guess. Lowering the lr would not help; the trunk is the cause."""
    found = _one_cycle(reentrant=True)
    assert found["GS413"].severity is Severity.WARNING
    for symptom in ("GS415", "GS419"):
        if symptom in found:
            assert (found[symptom].explained_by or "").startswith("GS413:")
            assert "GS413" in found[symptom].advice
    assert "GS419" in found or "GS415" in found


def test_the_same_recipe_checkpointed_without_reentrancy_is_silent():
    assert _one_cycle(reentrant=False) == {}


def test_inspect_of_a_reentrant_checkpoint_of_the_raw_batch_advises_the_checkpoint():
    torch.manual_seed(0)
    x, y = torch.randn(4, 6), torch.randint(0, 3, (4,))
    report = gradscope.inspect(Net("reentrant-raw"), x, lambda out: F.cross_entropy(out, y))
    found = [f for f in report.findings if f.rule == "GS101"]
    assert {f.subject for f in found} == {"stem.weight", "stem.bias"}
    assert all("use_reentrant=False" in f.advice and ".detach()" not in f.advice for f in found)
