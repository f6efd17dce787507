"""A resume that loads the checkpoint into a new model while the optimizer still holds the
old one's parameters: every tensor the optimizer trains stops getting gradients at the
resume (GS417), and the advice names the resume and its fix, beside the densification
case it already named."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import gradscope


def _net() -> nn.Module:
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))


def test_a_resume_into_a_new_model_the_optimizer_does_not_hold_is_named_with_its_fix():
    torch.manual_seed(0)
    model = _net()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    with gradscope.watch() as w:
        for step in range(1, 61):
            if step == 31:
                checkpoint = {"model": model.state_dict(), "opt": opt.state_dict()}
                model = _net()
                model.load_state_dict(checkpoint["model"])
                opt.load_state_dict(checkpoint["opt"])  # the old optimizer, the old tensors
            x = torch.randn(16, 6)
            loss = F.cross_entropy(model(x), (x[:, :3]).argmax(1))
            opt.zero_grad()
            loss.backward()
            opt.step()
    stopped = [f for f in w.report.findings if f.rule == "GS417"]
    assert len(stopped) == 4 and all(f.steps[0] == 31 for f in stopped)
    advice = stopped[0].advice
    assert "built a new model just before step 31 (a resume" in advice
    assert "build the optimizer over the new model" in advice
    assert 'group["params"][i] = new' in advice  # the densification case stays named
