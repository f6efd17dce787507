"""A clip to max_norm 0 (skorch's GradientNormClipping(gradient_clip_value=0), a config's
"0 = off" misread): clip_grad_norm_ multiplies every gradient by 0, so nothing learns.
GS406 names that, as the error, and the parameters left unmoved are its consequence; a
clip to a small positive max_norm is still the learning-rate limiter it was."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import gradscope


def _clipped_to(max_norm: float):
    torch.manual_seed(0)
    x = torch.randn(256, 10)
    y = (x[:, :3].sum(1) > 0).long()
    model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    with gradscope.watch() as w:
        for _ in range(4):
            for i in range(0, 256, 32):
                loss = F.cross_entropy(model(x[i : i + 32]), y[i : i + 32])
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=max_norm)
                opt.step()
    return w.report


def test_a_clip_to_max_norm_zero_is_named_as_zeroing_every_gradient():
    report = _clipped_to(0.0)
    clip = [f for f in report.findings if f.rule == "GS406"]
    assert len(clip) == 1 and clip[0].severity is gradscope.Severity.ERROR, report.findings
    assert "max_norm is 0" in clip[0].message
    assert "does not turn clipping off" in clip[0].advice
    unmoved = [f for f in report.findings if f.rule == "GS410"]
    assert unmoved and all(f.explained_by == "GS406:total-grad-norm" for f in unmoved)
    assert report.findings[0] is clip[0]


def test_a_clip_to_a_small_positive_max_norm_stays_the_lr_limiter():
    report = _clipped_to(1e-3)
    clip = [f for f in report.findings if f.rule == "GS406"]
    assert len(clip) == 1 and clip[0].severity is gradscope.Severity.WARNING, report.findings
    assert "learning-rate limiter" in clip[0].message
    assert not [f for f in report.findings if f.explained_by == "GS406:total-grad-norm"]
