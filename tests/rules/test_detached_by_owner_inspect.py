"""`inspect` of a parameter its own module's forward reads only through `.detach()`: the
module stops this loss's gradient on purpose, for a tensor another loss trains (an entropy
bottleneck's quantiles, fitted by its aux loss). It was an error, with the advice to remove
the .detach(); it is information. An encoder's output detached by its parent before the
decoder (a cut between modules) stays the error."""

from __future__ import annotations

import torch
from torch import nn

import gradscope
from gradscope.findings import Severity


class _Bottleneck(nn.Module):
    """Centres its input on medians it reads detached (its aux loss fits them)."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(4))
        self.quantiles = nn.Parameter(torch.zeros(4, 3))

    def forward(self, y: torch.Tensor) -> torch.Tensor:
        medians = self.quantiles[:, 1].detach()
        return (y - medians) * self.scale + medians


class _Codec(nn.Module):
    def __init__(self, cut_encoder: bool = False) -> None:
        super().__init__()
        self.cut_encoder = cut_encoder
        self.encode = nn.Linear(4, 4)
        self.bottleneck = _Bottleneck()
        self.decode = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.encode(x)
        return self.decode(self.bottleneck(y.detach() if self.cut_encoder else y))


def _none_grad(cut_encoder: bool) -> dict[str, object]:
    torch.manual_seed(0)
    x = torch.randn(8, 4)
    report = gradscope.inspect(_Codec(cut_encoder), x, lambda out: (out - x).pow(2).mean())
    return {f.subject: f for f in report.findings if f.rule == "GS101"}


def test_a_parameter_its_own_module_detaches_is_information():
    found = _none_grad(cut_encoder=False)
    assert set(found) == {"bottleneck.quantiles"}, found
    f = found["bottleneck.quantiles"]
    assert f.severity == Severity.INFO and "on purpose" in f.message, f
    assert "another loss" in f.advice


def test_an_encoder_detached_by_its_parent_is_still_the_error():
    found = _none_grad(cut_encoder=True)
    assert found["encode.weight"].severity == Severity.ERROR, found
    assert found["bottleneck.quantiles"].severity == Severity.INFO, found
