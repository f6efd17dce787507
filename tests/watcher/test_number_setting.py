"""A parameter an installed library keeps as a setting and reads only as a Python number:
normflows' iResBlock (the residual-flows reference code's) holds its Russian-roulette
estimator's geom_p and lamb as nn.Parameters and reads `torch.sigmoid(self.geom_p).item()`
to draw the power series' length, so every residual flow warned GS413 on two tensors per
block the user never wrote. Information naming the library's class; the same class in the
script's own file, or a library's parameter read through `.detach()`, stays a warning."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch
from torch import nn

import gradscope as gs
from tests.watcher.watch_scripts import imported_from

SOURCE = textwrap.dedent(
    """
    import torch
    from torch import nn


    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Linear(2, 2)
            self.geom_p = nn.Parameter(torch.tensor(1.0))

        def forward(self, x):
            n = 1 + int(torch.rand(()) < torch.sigmoid(self.geom_p).item())
            return x + self.net(x) * n


    class Detached(Block):
        def forward(self, x):
            return x + self.net(x) * self.geom_p.detach()
    """
)


def _block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, installed: bool, detached: bool = False
) -> type:
    name = f"flowlib_{'installed' if installed else 'own'}"
    module = imported_from(tmp_path, monkeypatch, SOURCE, name, installed)
    return module.Detached if detached else module.Block  # type: ignore[no-any-return]


def _gs413(block: type) -> list[gs.Finding]:
    torch.manual_seed(0)
    model = nn.Sequential(block(), nn.Linear(2, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    with gs.watch() as w:
        for _ in range(4):
            loss = model(torch.randn(8, 2)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return [f for f in w.report.findings if f.rule == "GS413"]


def test_a_setting_the_library_reads_as_a_number_is_information(tmp_path, monkeypatch):
    found = _gs413(_block(tmp_path, monkeypatch, installed=True))
    assert [f.subject for f in found] == ["0.geom_p"]
    assert found[0].severity == gs.Severity.INFO
    assert "flowlib_installed.Block reads it only as a Python number" in found[0].message


def test_the_same_class_in_the_scripts_own_file_stays_a_warning(tmp_path, monkeypatch):
    found = _gs413(_block(tmp_path, monkeypatch, installed=False))
    assert [(f.subject, f.severity) for f in found] == [("0.geom_p", gs.Severity.WARNING)]


def test_a_library_parameter_read_through_detach_stays_a_warning(tmp_path, monkeypatch):
    found = _gs413(_block(tmp_path, monkeypatch, installed=True, detached=True))
    assert [(f.subject, f.severity) for f in found] == [("0.geom_p", gs.Severity.WARNING)]
