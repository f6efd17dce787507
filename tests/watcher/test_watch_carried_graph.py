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
from gradscope.findings import Severity


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


def _layerwise(how: str):
    """Three blocks, each with its own head, loss and optimizer (greedy layer-wise or
    forward-forward training), each block's output handed to the next."""
    torch.manual_seed(0)
    blocks = [torch.nn.Linear(6, 8), torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)]
    heads = [torch.nn.Linear(8, 3) for _ in blocks]
    opts = [
        torch.optim.SGD([*b.parameters(), *h.parameters()], lr=0.1)
        for b, h in zip(blocks, heads, strict=True)
    ]
    with gradscope.watch() as w:
        for _ in range(3):
            x, y = torch.randn(5, 6), torch.randint(0, 3, (5,))
            h = x
            try:
                for block, head, opt in zip(blocks, heads, opts, strict=True):
                    h = torch.relu(block(h.detach() if how == "detached" else h))
                    loss = torch.nn.functional.cross_entropy(head(h), y)
                    opt.zero_grad()
                    loss.backward(retain_graph=how == "retained")
                    opt.step()
            except RuntimeError:
                break
    return w.report


@pytest.mark.parametrize("how", ["handed-on", "retained"])
def test_a_block_handed_on_with_its_graph_is_named_as_layer_wise(how):
    # the earlier graph is the first block's, stepped by the other optimizer in the same
    # batch: no hidden state is carried between batches
    (f,) = [f for f in _layerwise(how).findings if f.rule == "GS459"]
    # retained, the second block's graph fails first: the first holds no saved weight
    assert f"optimizer {0 if how == 'handed-on' else 1}" in f.message
    assert "without .detach()" in f.message
    assert "truncated-BPTT" not in f.message
    assert "block(h.detach())" in f.advice


def test_blocks_with_their_input_detached_are_silent():
    assert "GS459" not in {f.rule for f in _layerwise("detached").findings}


def test_a_carried_state_under_two_optimizers_is_still_the_carried_state():
    # the previous step's optimizer (the head's) owns tensors this loss reaches: the
    # older graph is the previous batch's hidden state, not a part handed on
    torch.manual_seed(0)
    rnn, head = torch.nn.GRU(4, 8), torch.nn.Linear(8, 1)
    opts = [torch.optim.SGD(rnn.parameters(), lr=0.1), torch.optim.SGD(head.parameters(), lr=0.1)]
    with gradscope.watch() as w:
        h = torch.zeros(1, 2, 8)
        for _ in range(3):
            out, h = rnn(torch.randn(6, 2, 4), h)
            loss = head(out).mean()
            for o in opts:
                o.zero_grad()
            try:
                loss.backward()
            except RuntimeError:
                break
            for o in opts:
                o.step()
    (f,) = [f for f in w.report.findings if f.rule == "GS459"]
    assert "truncated-BPTT" in f.message and "without .detach()" not in f.message


def _imagined(how: str):
    """A world model with its optimizer, then an actor with its own, trained on a rollout
    imagined from the model's states and scored by the model's reward head (Dreamer's
    dynamics backprop); the model's weights are not the actor's to step."""
    torch.manual_seed(0)
    encoder, dynamics, reward = (
        torch.nn.Linear(4, 6),
        torch.nn.GRUCell(2, 6),
        torch.nn.Linear(6, 1),
    )
    actor = torch.nn.Linear(6, 2)
    model = [*encoder.parameters(), *dynamics.parameters(), *reward.parameters()]
    model_opt = torch.optim.Adam(model, lr=1e-3)
    actor_opt = torch.optim.Adam(actor.parameters(), lr=1e-3)
    with gradscope.watch() as w:
        for _ in range(3):
            obs, act, rew = torch.randn(6, 4), torch.randn(5, 2), torch.randn(5, 1)
            states = torch.tanh(encoder(obs))
            predicted = dynamics(act, states[:-1])
            model_loss = torch.nn.functional.mse_loss(
                reward(states[:-1]), rew
            ) + torch.nn.functional.mse_loss(predicted, states[1:].detach())
            model_opt.zero_grad()
            model_loss.backward()
            model_opt.step()
            h = states if how == "carried" else states.detach()
            for p in (*encoder.parameters(), *dynamics.parameters()):
                p.requires_grad_(False)
            for _ in range(2):
                h = dynamics(torch.tanh(actor(h.detach())), h)
            for p in (*encoder.parameters(), *dynamics.parameters()):
                p.requires_grad_(True)
            actor_loss = -reward(h).mean()
            actor_opt.zero_grad()
            try:
                actor_loss.backward()
            except RuntimeError:
                break
            actor_opt.step()
    return w.report


def test_an_imagined_rollout_started_from_the_world_models_graph_is_named_as_handed_on():
    # the actor's loss reaches the model's reward head (stepped just before) and the
    # actor's weights (not stepped since): a part of the same batch, not a carried state
    (f,) = [f for f in _imagined("carried").findings if f.rule == "GS459"]
    assert "optimizer 0" in f.message and "imagined rollout" in f.message
    assert "truncated-BPTT" not in f.message and "reaches none" not in f.message
    assert "states.detach()" in f.advice


def test_an_imagined_rollout_from_detached_states_is_silent():
    report = _imagined("detached")
    assert not [f for f in report.findings if f.severity >= Severity.WARNING]
