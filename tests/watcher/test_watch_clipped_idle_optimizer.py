"""An auxiliary optimizer whose step() never runs, its parameters inside a clip of the whole
model's gradients (CompressAI's loop: `clip_grad_norm_(net.parameters(), 1.0)` clips the
entropy bottleneck's quantiles too, which only the aux optimizer holds). The clip found
that optimizer before its first step; it was then taken as one that stepped, and the
quantiles, never given a gradient (the aux loss never backpropagated), were told to check
that they take part in the loss (GS413). They are told as the idle optimizer's (GS411), as
they are without the clip. The aux loss backpropagated with no aux step is an error, also
where its gradients exist only between the main steps (its backward after the main step:
the aux zero_grad() clears them unapplied); the aux optimizer stepped is silent."""

from __future__ import annotations

import pytest
import torch

import gradscope
from gradscope.findings import Severity


class _Codec(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Linear(4, 4)
        self.quantiles = torch.nn.Parameter(torch.tensor([-10.0, 0.0, 10.0]))

    def aux_loss(self) -> torch.Tensor:
        """The quantiles fitted to the density as it is now, its own weights detached."""
        return (self.quantiles - self.net.weight.detach().sum(0)[:3]).pow(2).sum()


def _run(aux: str, clip: bool = True):
    """aux: `none` (the aux loss never backpropagated), `together` (backpropagated with the
    main loss, its step left out), `after` (backpropagated after the main step, its step
    left out), `step` (its own backward and step)."""
    torch.manual_seed(0)
    codec = _Codec()
    opt = torch.optim.Adam(codec.net.parameters(), lr=1e-3)
    aux_opt = torch.optim.Adam([codec.quantiles], lr=1e-3)
    with gradscope.watch() as w:
        for _ in range(6):
            opt.zero_grad()
            aux_opt.zero_grad()
            loss = codec.net(torch.randn(2, 4)).pow(2).mean()
            (loss + codec.aux_loss() if aux == "together" else loss).backward()
            if clip:
                torch.nn.utils.clip_grad_norm_(codec.parameters(), 1.0)
            opt.step()
            if aux in ("after", "step"):
                codec.aux_loss().backward()
            if aux == "step":
                aux_opt.step()
    return w.report


@pytest.mark.parametrize("clip", [True, False])
def test_the_idle_aux_optimizer_is_named_with_or_without_a_clip(clip):
    report = _run("none", clip)
    told = {f.rule: f for f in report.findings if f.subject == "quantiles"}
    assert set(told) == {"GS411"}, report.findings
    assert "whose step() never did" in told["GS411"].message


@pytest.mark.parametrize("aux", ["together", "after"])
def test_an_aux_loss_backpropagated_without_its_step_is_an_error(aux):
    """`after`: its gradients are there only between the main steps, and its zero_grad()
    clears them unapplied."""
    report = _run(aux)
    told = [f for f in report.findings if f.subject == "quantiles"]
    assert [f.rule for f in told] == ["GS411"], report.findings
    assert told[0].severity == Severity.ERROR and "no step applies" in told[0].message


def test_the_aux_optimizer_stepped_is_silent():
    report = _run("step")
    assert not [f for f in report.findings if f.severity >= Severity.WARNING], report.findings
