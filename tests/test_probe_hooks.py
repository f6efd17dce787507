"""The user's hooks and the pass: what runs, what does not, and what is given back.

The batch is cut from any graph it came from (hooks on its tensors do not run, that graph
stays usable); parameters' post-accumulate-grad hooks are set aside for the pass (they
consume a finished gradient: an optimizer stepped inside backward); hooks that shape the
gradient on its way (on activations, on parameters, module backward hooks) run once, as
in a training step, and are documented so.
"""

from __future__ import annotations

from collections import namedtuple

import pytest
import torch
from torch import nn

import gradscope
from gradscope.inspector import hooks


def counter():
    calls = []
    return calls, lambda grad: calls.append(grad.shape) and None


def test_an_activation_given_as_the_batch_is_cut_from_its_graph():
    torch.manual_seed(0)
    encoder, head = nn.Linear(4, 4), nn.Linear(4, 1)
    h = encoder(torch.randn(3, 4))
    calls, hook = counter()
    h.register_hook(hook)
    report = gradscope.inspect(head, h, explain=False)
    assert calls == [] and encoder.weight.grad is None and not report.findings
    head(h).mean().backward()  # the user's own backward: the graph was not freed
    assert len(calls) == 1 and encoder.weight.grad is not None


@pytest.mark.parametrize("shape", ["tensor", "dict", "tuple", "namedtuple"])
def test_hooks_on_batch_tensors_do_not_run(shape):
    x = torch.randn(3, 4, requires_grad=True)
    calls, hook = counter()
    x.register_hook(hook)
    Pair = namedtuple("Pair", "x y")

    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 1)

        def forward(self, x, y=None):
            return self.lin(x).mean() + (0 if y is None else y.sum() * 0)

    batch = {
        "tensor": x,
        "dict": {"x": x, "y": torch.ones(2)},
        "tuple": (x, torch.ones(2)),
        "namedtuple": Pair(x, torch.ones(2)),
    }[shape]
    gradscope.inspect(Two(), batch, explain=False)
    assert calls == [] and x.grad is None


def test_cut_keeps_the_batch_itself_when_nothing_requires_grad():
    batch = {"x": torch.ones(2), "ids": [torch.zeros(3, dtype=torch.long)]}
    assert hooks.cut(batch) is batch
    leaf = torch.ones(2, requires_grad=True)
    Pair = namedtuple("Pair", "a b")
    out = hooks.cut(Pair(leaf, 1))
    assert type(out) is Pair and out.b == 1 and out.a is not leaf and out.a.requires_grad
    assert out.a.data_ptr() == leaf.data_ptr()  # an alias, not a copy


def test_an_optimizer_stepped_inside_backward_is_neither_stepped_nor_blamed():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 1))
    optimizers = {p: torch.optim.Adam([p], lr=1e-2) for p in model.parameters()}

    def step(p):
        optimizers[p].step()
        optimizers[p].zero_grad()  # the gradient is consumed: none left after backward

    handles = [p.register_post_accumulate_grad_hook(step) for p in model.parameters()]
    before = [p.detach().clone() for p in model.parameters()]
    report = gradscope.inspect(model, torch.randn(3, 4), explain=False)
    assert report.findings == [], [f.message for f in report.findings]
    assert all(p.grad_norm for p in report.stats.params)  # measured before any step
    assert all(not o.state for o in optimizers.values())  # the user's optimizer untouched
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    model(torch.randn(3, 4)).mean().backward()  # the hooks are back: the user's step runs
    assert all(o.state for o in optimizers.values())
    handles[0].remove()  # and the user's handles still remove them
    assert not next(iter(model.parameters()))._post_accumulate_grad_hooks


def test_hooks_that_shape_the_gradient_run_once_as_in_training():
    class Scaled(nn.Module):
        """A hook on an activation that scales its gradient: without it, another gradient."""

        def __init__(self):
            super().__init__()
            self.a, self.b, self.calls = nn.Linear(4, 4), nn.Linear(4, 1), 0

        def forward(self, x):
            h = self.a(x)
            h.register_hook(self.scale)
            return self.b(h).mean()

        def scale(self, grad):
            self.calls += 1
            return grad * 10

    torch.manual_seed(0)
    model, x = Scaled(), torch.randn(3, 4)
    calls, hook = counter()
    model.a.weight.register_hook(hook)
    report = gradscope.inspect(model, x, explain=False)
    assert model.calls == 1 and len(calls) == 1
    model(x).mean().backward()
    got = {p.name: p.grad_norm for p in report.stats.params}
    # what training gets, scaled by the hook (measured without it: 10x smaller)
    assert got["a.weight"] == pytest.approx(model.a.weight.grad.norm().item())
