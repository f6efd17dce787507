"""`gradscope diff MODEL --b-deterministic`: the second pass runs under
torch.use_deterministic_algorithms(True), its forward and its backward, and nothing of it
outlives the pass."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn
from typer.testing import CliRunner

from gradscope.cli.root import app
from gradscope.diff import diff
from gradscope.diff.engine import DiffOptions

X = torch.randn(6, 4, generator=torch.Generator().manual_seed(0))


class _FlagInBackward(torch.autograd.Function):
    """Identity forward; the backward scales by 2 when deterministic mode is on."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad * (2.0 if torch.are_deterministic_algorithms_enabled() else 1.0)


class FlagInForward(nn.Module):
    """Adds 1 where deterministic mode is on: where the setting reaches the forward."""

    def forward(self, x):
        return x + float(torch.are_deterministic_algorithms_enabled())


class Net(nn.Module):
    def __init__(self, forward_flag: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.first = nn.Linear(4, 8)
        self.flag = FlagInForward() if forward_flag else nn.Identity()
        self.last = nn.Linear(8, 2)

    def forward(self, x):
        h = self.flag(self.first(x))
        return self.last(_FlagInBackward.apply(torch.tanh(h)))


def _flags():
    return (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.backends.cudnn.deterministic,
        torch.backends.cudnn.benchmark,
    )


def test_the_setting_reaches_the_forward_and_is_undone():
    model, before = Net(forward_flag=True), _flags()
    result = diff(model, model, X, options=DiffOptions(deterministic=True, noise_check=False))
    assert _flags() == before
    assert result.setting == "deterministic algorithms"
    origin = result.modules[result.origin]
    assert result.differs and origin.ref == "flag" and result.findings[0].rule == "GS601"


def test_the_setting_reaches_the_backward():
    model = Net(forward_flag=False)
    result = diff(model, model, X, options=DiffOptions(deterministic=True, noise_check=False))
    assert result.origin is None  # every output agrees
    first = result.params[result.first_grad]
    assert first.ref.startswith("first.") and result.findings[0].rule == "GS602"


def test_without_the_option_the_same_model_is_bitwise_identical():
    model = Net(forward_flag=True)
    result = diff(model, model, X, options=DiffOptions(noise_check=False))
    assert not result.differs and result.bitwise


def test_cli_compares_a_builtin_example_with_itself_deterministic():
    result = CliRunner().invoke(app, ["diff", "healthy-mlp", "--b-deterministic", "-f", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["setting"] == "deterministic algorithms"
    assert doc["summary"]["verdict"] == "identical (bitwise)"
    assert not torch.are_deterministic_algorithms_enabled()


@pytest.mark.parametrize("kept", [True, False])
def test_a_global_setting_of_the_user_is_kept(kept):
    torch.use_deterministic_algorithms(kept, warn_only=True)
    try:
        model = Net(forward_flag=False)
        diff(model, model, X, options=DiffOptions(deterministic=True, noise_check=False))
        assert torch.are_deterministic_algorithms_enabled() is kept
        assert torch.is_deterministic_algorithms_warn_only_enabled()
    finally:
        torch.use_deterministic_algorithms(False)
