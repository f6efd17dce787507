"""torch's "optimizer in backward": an optimizer per parameter, stepped (and its gradient
released) by a post-accumulate-grad hook as each gradient lands. The hook registered on
only some parameters left the others unstepped, and GS411 said they were in no optimizer
param group (each has one, never stepped) with advice for a target or teacher copy; it
names the missing hook. All parameters hooked is silent, and a single optimizer that left
a layer out, with hooks of another purpose on its parameters, keeps the usual advice.
A clip after the backward sees only released gradients (GS457): its advice was to move it
between the backward and the step, where an optimizer in backward has no line; it says
to bound each gradient in the hook. A clip before the backward of an ordinary loop keeps
that advice."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import gradscope


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 3))


def _train(model, step_hooked, steps=5, clip=None, rule="GS411"):
    with gradscope.watch() as w:
        for _ in range(steps):
            x, y = torch.randn(4, 6), torch.randint(0, 3, (4,))
            if clip == "before":
                torch.nn.utils.clip_grad_norm_(model.parameters(), 0.01)
            F.cross_entropy(model(x), y).backward()
            if clip == "after":
                torch.nn.utils.clip_grad_norm_(model.parameters(), 0.01)
            step_hooked()
    return {f.subject: f for f in w.report.findings if f.rule == rule}


def _in_backward(hooked: int, **kw):
    model = _model()
    params = list(model.parameters())
    optimizers = {p: torch.optim.AdamW([p], lr=1e-2) for p in params}

    def step(p):
        optimizers[p].step()
        optimizers[p].zero_grad()

    for p in params[:hooked]:
        p.register_post_accumulate_grad_hook(step)
    return _train(model, lambda: None, **kw)


def test_a_parameter_left_out_of_the_hooks_is_named():
    found = _in_backward(hooked=4)
    assert set(found) == {"4.weight", "4.bias"}
    f = found["4.weight"]
    assert "post-accumulate-grad hook" in f.message and "no optimizer param group" not in f.message
    assert "register_post_accumulate_grad_hook" in f.advice and "teacher" not in f.advice


def test_every_parameter_hooked_is_silent():
    assert _in_backward(hooked=6) == {}


def test_one_optimizer_that_left_a_layer_out_keeps_its_advice():
    model = _model()
    opt = torch.optim.SGD(list(model.parameters())[:4], lr=0.05)
    norms = []
    for p in model.parameters():  # a hook of another purpose: logging each gradient
        p.register_post_accumulate_grad_hook(lambda q: norms.append(q.grad.norm()))

    def step():
        opt.step()
        opt.zero_grad()

    found = _train(model, step)
    assert set(found) == {"4.weight", "4.bias"}
    assert "register_post_accumulate_grad_hook" not in found["4.weight"].advice


def test_a_clip_after_an_optimizer_in_backward_says_where_to_bound():
    found = _in_backward(hooked=6, steps=6, clip="after", rule="GS457")
    assert found
    for f in found.values():
        assert "step inside the backward" in f.message and "it sees none" in f.message
        assert "inside the hook" in f.advice and "before optimizer.step()" not in f.advice


def test_a_clip_before_the_backward_of_an_ordinary_loop_keeps_its_advice():
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)

    def step():
        opt.step()
        opt.zero_grad()

    (f,) = _train(model, step, steps=6, clip="before", rule="GS457").values()
    assert "before optimizer.step()" in f.advice and "inside the hook" not in f.advice
