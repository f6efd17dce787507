"""A weight read straight into a LayerNorm/RMSNorm, as its module's only parameter, is
scale-invariant: its gradient is ∝ 1/‖w‖ by design. RWKV's small-init embedding (uniform
±1e-4, then LayerNorm) has a gradient norm of ~1e3 at init, and GS104 called that exploding
on a healthy reference model. The norm's input must be the module's very output (not a sum
with it), and a module with a bias is not invariant: both are still judged as before."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import gradscope

VOCAB, WIDTH = 20, 32


class RMSNorm(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.weight


class Reader(nn.Module):
    """`first` (its weight tiny), then `norm` on its output, a small MLP and a head."""

    def __init__(self, first: nn.Module, norm: nn.Module, gain: float = 1.0, depth: int = 1):
        super().__init__()
        self.first, self.norm = first, norm
        self.body = nn.Sequential(*[nn.Linear(WIDTH, WIDTH) for _ in range(depth)])
        for layer in self.body:
            nn.init.normal_(layer.weight, std=gain / WIDTH**0.5)
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(self.norm(self.first(x))))


def _twice(norm: type[nn.Module]) -> nn.Module:
    """RWKV's ln0 on the embedding, then the next norm on the stream it made."""
    return nn.Sequential(norm(WIDTH), norm(WIDTH))


def _tiny(module: nn.Module, scale: float = 1e-5) -> nn.Module:
    nn.init.uniform_(module.weight, -scale, scale)
    return module


def _inspect(model: nn.Module, x: torch.Tensor):
    y = torch.randint(VOCAB, x.shape[:2], generator=torch.Generator().manual_seed(1))
    return gradscope.inspect(model, x, lambda out: F.cross_entropy(out.flatten(0, 1), y.flatten()))


def _tokens() -> torch.Tensor:
    return torch.randint(VOCAB, (8, 32), generator=torch.Generator().manual_seed(0))


def _exploding(report) -> list[str]:
    return [f.subject for f in report.findings if f.slug == "exploding"]


@pytest.mark.parametrize(
    "first, norm, x",
    [
        (lambda: nn.Embedding(VOCAB, WIDTH), lambda: _twice(nn.LayerNorm), _tokens),
        (lambda: nn.Embedding(VOCAB, WIDTH), lambda: _twice(RMSNorm), _tokens),
        (
            lambda: nn.Linear(VOCAB, WIDTH, bias=False),
            lambda: _twice(nn.LayerNorm),
            lambda: F.one_hot(_tokens(), VOCAB).float(),
        ),
    ],
    ids=["table-layernorm", "table-rmsnorm", "bias-free-linear-layernorm"],
)
def test_a_tiny_weight_read_into_a_norm_is_not_exploding(first, norm, x):
    torch.manual_seed(0)
    report = _inspect(Reader(_tiny(first()), norm()), x())
    assert report.stats.norm_fed == ("first", "norm.0")
    assert _exploding(report) == [], report.findings


def test_a_tiny_weight_with_a_bias_before_the_norm_is_still_judged():
    """Its bias does not scale with the weight: the norm does not undo a rescaling."""
    torch.manual_seed(0)
    first = _tiny(nn.Linear(VOCAB, WIDTH))
    nn.init.zeros_(first.bias)
    report = _inspect(Reader(first, _twice(nn.LayerNorm)), F.one_hot(_tokens(), VOCAB).float())
    assert "first.weight" in _exploding(report), report.findings


def test_an_explosion_after_the_norm_still_fires():
    """A table at unit scale read into a LayerNorm, then a deep stack that multiplies the
    signal on its way back: the table's gradient at unit weight RMS is still huge."""
    torch.manual_seed(0)
    table = nn.Embedding(VOCAB, WIDTH)
    report = _inspect(Reader(table, nn.LayerNorm(WIDTH), gain=4.0, depth=10), _tokens())
    assert report.stats.norm_fed == ("first",)
    assert "first.weight" in _exploding(report), report.findings
