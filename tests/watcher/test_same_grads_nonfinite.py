"""NaN gradients are not gradients repeated (GS473): every NaN has one bit pattern, so a
gradient that went NaN and stays NaN (a hand normalisation `p.grad /= p.grad.norm()` of a
layer whose gradient is exactly zero behind a zero-initialised output layer, as a growing
neural cellular automaton's is at its first step) fingerprints the same at every step.
That was named a stale all-reduce buffer beside the NaN weights (GS434) that explain it.
The same normalisation with its epsilon is healthy; a buffer made once still is GS473."""

from __future__ import annotations

import torch
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

import gradscope
from gradscope.findings import Severity

STEPS = 26
"""Steps 1-3 and the pair 25-26 are compared: 4 intervals."""


def _rules(how: str) -> set[str]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    torch.nn.init.zeros_(model[2].weight)  # the "do nothing" start of a residual update
    params = list(model.parameters())
    opt = torch.optim.Adam(params, lr=1e-2)
    xs, ys = torch.randn(STEPS, 16, 6), torch.randn(STEPS, 16, 3)
    buffer = None
    with gradscope.watch() as w:
        for x, y in zip(xs, ys, strict=True):
            opt.zero_grad(set_to_none=False)  # the same .grad tensors, versions moving
            ((model(x) - y) ** 2).mean().backward()
            if how == "stale buffer":
                grads = [p.grad for p in params]
                buffer = _flatten_dense_tensors(grads) if buffer is None else buffer
                for g, synced in zip(grads, _unflatten_dense_tensors(buffer, grads), strict=True):
                    g.copy_(synced)
            else:
                eps = 1e-8 if how == "with eps" else 0.0
                with torch.no_grad():
                    for p in params:
                        p.grad /= p.grad.norm() + eps
            opt.step()
    return {f.rule for f in w.report.findings if f.severity is not Severity.INFO}


def test_gradients_gone_nan_are_not_named_a_stale_buffer():
    found = _rules("zero norm")
    assert "GS434" in found
    assert "GS473" not in found


def test_the_normalisation_with_its_epsilon_is_healthy_and_a_stale_buffer_still_fires():
    assert _rules("with eps") == set()
    assert "GS473" in _rules("stale buffer")
