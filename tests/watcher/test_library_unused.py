"""A submodule an installed library builds and its forward never calls: MONAI's
TransformerBlock (monai/networks/blocks/transformerblock.py) builds norm_cross_attn
whatever with_cross_attention says and calls it only when that is True, so every UNETR
trained without cross-attention warned GS413 on 24 LayerNorm tensors the user never
wrote. Information naming the library's class; a layer the user's own forward defines
and never calls, or a library's layer that runs but whose output is cut, stays a warning."""

from __future__ import annotations

import sys
import types

import torch
from torch import nn

import gradscope as gs


class Block(nn.Module):
    """TransformerBlock's pattern: the cross-attention norm exists either way."""

    def __init__(self, with_cross_attention: bool = False, cut: bool = False) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(8)
        self.mlp = nn.Linear(8, 8)
        self.norm_cross_attn = nn.LayerNorm(8)
        self.with_cross_attention = with_cross_attention
        self.cut = cut

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.mlp(self.norm1(x))
        if self.with_cross_attention:
            x = x + self.norm_cross_attn(x)
        if self.cut:
            x = x + self.norm_cross_attn(x).detach()
        return x


def _installed(cls: type) -> type:
    """The same class as a package under site-packages defines it."""
    name = "installedlib.blocks"
    module = types.ModuleType(name)
    module.__file__ = "/usr/lib/python3/site-packages/installedlib/blocks.py"
    sys.modules.setdefault(name, module)
    return type(cls.__name__, (cls,), {"__module__": name})


def _gs413(block: type, cut: bool = False) -> list[gs.Finding]:
    torch.manual_seed(0)
    model = nn.Sequential(block(cut=cut), nn.Linear(8, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    with gs.watch() as w:
        for _ in range(4):
            loss = model(torch.randn(4, 8)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return [f for f in w.report.findings if f.rule == "GS413"]


def test_a_submodule_the_library_never_calls_is_information_naming_its_class():
    found = _gs413(_installed(Block))
    assert {f.subject for f in found} == {"0.norm_cross_attn.weight", "0.norm_cross_attn.bias"}
    assert all(f.severity == gs.Severity.INFO for f in found)
    assert all("installedlib.blocks.Block's forward" in f.message for f in found)


def test_a_layer_the_users_own_forward_never_calls_stays_a_warning():
    found = _gs413(Block)
    assert len(found) == 2
    assert all(f.severity == gs.Severity.WARNING for f in found)


def test_a_library_layer_that_runs_with_its_output_cut_stays_a_warning():
    found = _gs413(_installed(Block), cut=True)
    assert len(found) == 2
    assert all(f.severity == gs.Severity.WARNING for f in found)
