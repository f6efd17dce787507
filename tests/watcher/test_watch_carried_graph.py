"""A backward that failed on a graph an earlier step built (GS459): truncated BPTT with
the hidden state never detached died at step 2 in autograd ("modified by an inplace
operation" under retain_graph=True, "backward through the graph a second time" without),
and the watch reported the crash with no finding. The look-alikes stay silent: the same
loop with the state detached, and failures whose graph is the step's own (an in-place op
on a saved activation, a second backward on the same loss), also where every step reuses
a view of a weight taken once before the loop."""

from __future__ import annotations

import pytest
import torch

import gradscope


def _run(how: str):
    torch.manual_seed(0)
    rnn, head = torch.nn.GRU(4, 8), torch.nn.Linear(8, 1)
    opt = torch.optim.SGD([*rnn.parameters(), *head.parameters()], lr=0.1)
    scale = torch.nn.Parameter(torch.ones(8))
    with gradscope.watch() as w:
        view = scale.view(1, 1, 8)  # built once, reused: nothing saved to free
        h = torch.zeros(1, 2, 8)
        for step in range(1, 5):
            if how != "carried" and how != "carried-retained":
                h = h.detach()
            out, h = rnn(torch.randn(6, 2, 4), h)
            y = torch.sigmoid(head(out * view if how == "view-reused" else out))
            if how in ("in-place", "view-reused") and step == 3:
                y.mul_(2)  # sigmoid's saved output, changed before its backward
            loss = y.mean()
            opt.zero_grad()
            try:
                loss.backward(retain_graph=how == "carried-retained")
                if how == "twice" and step == 3:
                    loss.backward()
            except RuntimeError:
                break
            opt.step()
    return w.report


@pytest.mark.parametrize("how", ["carried", "carried-retained"])
def test_a_hidden_state_carried_with_its_graph_is_named(how):
    (f,) = [f for f in _run(how).findings if f.rule == "GS459"]
    assert "built at an earlier step" in f.message and f.steps == (2,)
    assert "h.detach()" in f.advice


@pytest.mark.parametrize("how", ["detached", "in-place", "twice", "view-reused"])
def test_a_detached_state_or_a_failure_within_one_step_is_silent(how):
    assert "GS459" not in {f.rule for f in _run(how).findings}
