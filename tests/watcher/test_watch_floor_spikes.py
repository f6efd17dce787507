"""A layer whose gradient spikes at the steps a floored loss term rises above its floor
(PlaNet's and Dreamer's free nats, torch.max(kl, free_nats)): the KL's gradient reaches the
posterior and the encoder only at those steps, by design, and GS450 warned of a layer spike.
Told as information now where every layer that spiked lies below such a floor in the
graphs read; a layer that spiked on a rare input beside that floor still warns."""

from __future__ import annotations

import functools

import pytest
import torch

import gradscope
from gradscope.findings import Severity

ABOVE = (30, 34, 38)
"""The steps the term is above its floor (or the rare input column is filled)."""


@functools.cache
def _run(how: str):
    torch.manual_seed(0)
    encoder, head, side = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
    params = [*encoder.parameters(), *head.parameters(), *side.parameters()]
    opt = torch.optim.SGD(params, lr=1e-4)
    with gradscope.watch() as w:
        for step in range(1, 46):
            x, rare = torch.randn(16, 4), 0.01 * torch.randn(16, 4)
            if how == "rare-input" and step in ABOVE:
                rare = torch.randn(16, 4)
            h = encoder(x)
            recon = 10 * torch.nn.functional.mse_loss(head(h.detach()) + side(rare), x)
            kl = 5 * (h**2).sum(-1).mean()
            free = 0.0 if how == "floor" and step in ABOVE else 1e6
            loss = recon + 1e-3 * (h - x).pow(2).mean() + torch.maximum(kl, torch.tensor(free))
            opt.zero_grad()
            loss.backward()
            opt.step()
    return [f for f in w.report.findings if f.rule == "GS450"]


def test_spikes_where_a_free_nats_floor_lets_the_term_through_are_information():
    (f,) = _run("floor")
    assert f.severity == Severity.INFO and "free nats" in f.message
    assert f.subject == "Linear"  # the encoder, the first layer made


def test_a_rare_input_beside_a_floor_still_warns():
    (f,) = _run("rare-input")
    assert f.severity == Severity.WARNING and "free nats" not in f.message
    assert f.subject == "Linear2"  # the layer that reads the rare column


@pytest.mark.parametrize("how", ["floor", "rare-input"])
def test_the_spikes_are_at_the_steps_the_term_came_through(how):
    (f,) = _run(how)
    assert set(f.steps) <= set(ABOVE)
