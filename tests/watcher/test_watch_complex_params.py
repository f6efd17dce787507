"""Complex-valued parameters (a Fourier layer's spectral weights, a complex linear layer):
gradscope measures them by |z|, imaginary part included, everywhere it reads them."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import gradscope
from gradscope.findings import Severity


class _Spectral(torch.nn.Module):
    """A 1d Fourier layer: the lowest modes mixed by complex weights."""

    def __init__(self, width: int = 4, modes: int = 3) -> None:
        super().__init__()
        self.modes = modes
        self.weight = torch.nn.Parameter(torch.rand(width, width, modes, dtype=torch.cfloat) / 16)
        self.lift = torch.nn.Conv1d(1, width, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.lift(x)
        h_ft = torch.fft.rfft(h)
        out = torch.zeros_like(h_ft)
        out[..., : self.modes] = torch.einsum("bix,iox->box", h_ft[..., : self.modes], self.weight)
        return torch.fft.irfft(out, n=x.shape[-1]).sum(1, keepdim=True)


def _gs411(how: str):
    torch.manual_seed(0)
    model = _Spectral()
    real_only = [p for p in model.parameters() if not p.is_complex()]
    opt = torch.optim.Adam(real_only, lr=1e-2)
    x, y = torch.randn(8, 1, 16), torch.randn(8, 1, 16)
    with gradscope.watch() as w:
        for _ in range(6):
            loss = F.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if how == "by-hand":
                with torch.no_grad():  # a rule of its own moves the spectral weights
                    model.weight.mul_(0.9)
    return [f for f in w.report.findings if f.rule == "GS411"]


def test_complex_weights_left_out_of_the_optimizer_are_the_error():
    """Their norm at the end was read without the imaginary part, so the weights never
    moved looked changed and were told a local rule moved them (information)."""
    (f,) = _gs411("left-out")
    assert f.severity == Severity.ERROR and f.subject == "weight"


def test_complex_weights_moved_by_hand_are_still_information():
    (f,) = _gs411("by-hand")
    assert f.severity == Severity.INFO and "piled up unread" in f.message


class _Pair(torch.nn.Module):
    """Spectral weights as a real/imaginary pair; `registered` False keeps the imaginary
    half as a plain tensor attribute, which model.parameters() does not list."""

    def __init__(self, registered: bool) -> None:
        super().__init__()
        self.w_re = torch.nn.Parameter(torch.rand(4, 4, 3) / 16)
        w_im = (torch.rand(4, 4, 3) / 16).requires_grad_()
        self.w_im = torch.nn.Parameter(w_im) if registered else w_im
        self.lift = torch.nn.Conv1d(1, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h_ft = torch.fft.rfft(self.lift(x))
        out = torch.zeros_like(h_ft)
        weight = torch.complex(self.w_re, self.w_im)
        out[..., :3] = torch.einsum("bix,iox->box", h_ft[..., :3], weight)
        return torch.fft.irfft(out, n=x.shape[-1]).sum(1, keepdim=True)


def _pair_gs411(registered: bool, optimizer_holds_all: bool = True):
    torch.manual_seed(0)
    model = _Pair(registered)
    params = list(model.parameters()) if optimizer_holds_all else [model.w_re, model.lift.weight]
    opt = torch.optim.Adam(params, lr=1e-2)
    x, y = torch.randn(8, 1, 16), torch.randn(8, 1, 16)
    with gradscope.watch() as w:
        for _ in range(4):
            loss = F.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return [f for f in w.report.findings if f.rule == "GS411"]


def test_a_half_kept_as_a_plain_tensor_is_named_and_told_to_register():
    """It was named `tensor3` and told to pass model.parameters() to the optimizer, which
    does not list it."""
    (f,) = _pair_gs411(registered=False)
    assert f.severity == Severity.ERROR and f.subject == "w_im"
    assert "not an nn.Parameter" in f.message and "self.w_im = nn.Parameter" in f.advice


def test_a_registered_half_left_out_of_the_optimizer_keeps_its_advice():
    fs = _pair_gs411(registered=True, optimizer_holds_all=False)
    assert sorted(f.subject for f in fs) == ["lift.bias", "w_im"]
    assert all("nn.Parameter" not in f.advice for f in fs)


def test_every_half_registered_and_stepped_is_clean():
    assert _pair_gs411(registered=True) == []
