"""inspect on a Conv-TasNet separator (Asteroid's TDConvNet): each block returns a residual
(the next block's input) and a skip (summed for the mask), so the last block's residual
conv feeds nothing and gets no gradient by design. GS101 said it was an error, while watch
already told it as the stack's tail (information); inspect now says the same. A residual
conv left unused in a middle block stays an error."""

from __future__ import annotations

import torch
from torch import nn

import gradscope
from gradscope.findings import Severity


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(4, 4, 3, padding=1)
        self.res = nn.Conv1d(4, 4, 1)
        self.skip = nn.Conv1d(4, 4, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.relu(self.conv(x))
        return self.res(y), self.skip(y)


class Separator(nn.Module):
    def __init__(self, unused: int | None = None) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(4))
        self.unused = unused

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = 0
        for i, block in enumerate(self.blocks):
            res, skip = block(x)
            x = x if i == self.unused else x + res
            skips = skips + skip
        return torch.sigmoid(skips)


def _gs101(unused: int | None = None):
    torch.manual_seed(0)
    report = gradscope.inspect(Separator(unused), torch.randn(2, 4, 16))
    return {f.subject: f for f in report.findings if f.rule == "GS101"}


def test_the_last_blocks_residual_conv_is_information():
    found = _gs101()
    assert set(found) == {"blocks.3.res.weight", "blocks.3.res.bias"}
    assert all(f.severity == Severity.INFO for f in found.values())
    assert all("the last block of blocks" in f.message for f in found.values())


def test_a_middle_blocks_residual_left_unused_stays_an_error():
    found = _gs101(unused=1)
    assert {"blocks.1.res.weight", "blocks.1.res.bias"} <= set(found)
    assert found["blocks.1.res.weight"].severity == Severity.ERROR
