"""Feature reconstruction (DINOSAUR: slots decode a frozen encoder's features) with the
encoder's forward left attached and the encoder in the optimizer: the MSE's target is the
prediction's own input, trained toward it (GS477). The same target under torch.no_grad(), a
VICReg-like invariance term between two views, two halves of one batched output and an
autoencoder of its data are not this."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import gradscope


def _features(mode: str):
    torch.manual_seed(0)
    encoder, decoder = nn.Linear(6, 8), nn.Sequential(nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 8))
    params = [*decoder.parameters()] + ([] if mode == "frozen" else [*encoder.parameters()])
    opt = torch.optim.Adam(params, lr=1e-3)
    with gradscope.watch() as w:
        for _ in range(4):
            x = torch.randn(16, 6)
            if mode == "frozen":
                with torch.no_grad():
                    target = encoder(x)
                loss = F.mse_loss(decoder(target), target)
            elif mode == "attached":
                target = encoder(x)
                loss = F.mse_loss(decoder(target), target)
            elif mode == "views":  # the same encoder on two noisy views
                a, b = (
                    encoder(x + 0.1 * torch.randn_like(x)),
                    encoder(x + 0.1 * torch.randn_like(x)),
                )
                loss = F.mse_loss(decoder(a), b)
            elif mode == "halves":  # one batched forward, split in two
                a, b = encoder(torch.cat([x, x.flip(0)])).chunk(2)
                loss = F.mse_loss(decoder(a), b)
            else:  # an autoencoder of its data
                loss = F.smooth_l1_loss(
                    nn.functional.linear(decoder(encoder(x)), encoder.weight.T), x
                )
            opt.zero_grad()
            loss.backward()
            opt.step()
    return w.report.findings


def test_a_target_the_prediction_is_computed_from_is_named():
    (found,) = [f for f in _features("attached") if f.rule == "GS477"]
    assert "torch.no_grad()" in found.advice and "pulls the target" in found.message


@pytest.mark.parametrize("mode", ["frozen", "views", "halves", "autoencoder"])
def test_stopped_targets_other_views_and_data_are_not_this(mode):
    assert "GS477" not in {f.rule for f in _features(mode)}
