"""GS413 on a WaveNet-style stack: every residual layer returns a residual (the next
layer's input) and a skip (summed for the head), so the last layer's residual conv is
computed for nothing and never gets a gradient. Information, said as that; a loop that
leaves the last block out, and a middle block's skip dropped from the sum, still warn."""

from __future__ import annotations

import torch
from torch import nn

import gradscope
from gradscope.findings import Severity


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.res, self.skip = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x):
        h = torch.tanh(self.conv(x))
        return x + self.res(h), self.skip(h)


class Net(nn.Module):
    def __init__(self, how: str):
        super().__init__()
        self.how = how
        self.blocks, self.head = nn.ModuleList(Layer() for _ in range(4)), nn.Linear(8, 1)

    def forward(self, x):
        skips = 0
        for k, block in enumerate(self.blocks[:-1] if self.how == "last-skipped" else self.blocks):
            x, skip = block(x)
            skips = skips + (0 if self.how == "skip-dropped" and k == 1 else skip)
        return self.head(torch.relu(skips))


def _never_updated(how: str) -> dict[str, object]:
    torch.manual_seed(0)
    net = Net(how)
    opt = torch.optim.Adam(net.parameters(), 1e-3)
    with gradscope.watch() as w:
        for _ in range(3):
            loss = net(torch.randn(16, 8)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return {f.subject: f.severity for f in w.report.findings if f.rule == "GS413"} | {
        f.subject + ":message": f.message for f in w.report.findings if f.rule == "GS413"
    }


def test_the_last_layers_residual_conv_is_information():
    found = _never_updated("wavenet")
    assert found["blocks.3.res.weight"] == Severity.INFO
    assert "the last block of blocks" in found["blocks.3.res.weight:message"]
    assert not any(k.startswith("blocks.3.skip") or k.startswith("blocks.2") for k in found)


def test_a_loop_that_leaves_the_last_block_out_still_warns():
    found = _never_updated("last-skipped")
    assert found["blocks.3.conv.weight"] == Severity.WARNING
    assert found["blocks.3.res.weight"] == Severity.WARNING


def test_a_middle_blocks_skip_dropped_still_warns():
    found = _never_updated("skip-dropped")
    assert found["blocks.1.skip.weight"] == Severity.WARNING


class Block(nn.Module):
    """An N-BEATS block: a backcast (subtracted from the next block's input) and a forecast
    (summed for the output)."""

    def __init__(self):
        super().__init__()
        self.fc, self.back, self.fore = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 2)

    def forward(self, x):
        h = torch.relu(self.fc(x))
        return self.back(h), self.fore(h)


def _stack_itself(how: str) -> dict[str, Severity]:
    """The stack is the model: an nn.ModuleList of blocks handed to the optimizer whole, its
    parameters named `2.back.weight`."""
    torch.manual_seed(0)
    blocks = nn.ModuleList(Block() for _ in range(3))
    opt = torch.optim.Adam(blocks.parameters(), 1e-3)
    with gradscope.watch() as w:
        for _ in range(3):
            x, forecast = torch.randn(16, 8), 0
            for k, block in enumerate(blocks):
                back, fore = block(x)
                x = x if how == "backcast-dropped" and k == 1 else x - back
                forecast = forecast + fore
            loss = forecast.pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return {f.subject: f.severity for f in w.report.findings if f.rule == "GS413"}


def test_the_last_backcast_of_a_stack_that_is_the_model_is_information():
    assert _stack_itself("nbeats") == {"2.back.weight": Severity.INFO, "2.back.bias": Severity.INFO}


def test_a_middle_blocks_backcast_dropped_from_a_stack_that_is_the_model_still_warns():
    found = _stack_itself("backcast-dropped")
    assert found["1.back.weight"] == Severity.WARNING
