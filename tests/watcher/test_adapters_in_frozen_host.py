"""GS440 on adapters inserted into a frozen network: a host switched to eval on purpose
(its own dropouts off) with trained gated layers inside it that stay in train mode is
Flamingo's recipe, silent; the same host put in eval after the adapters went in, so the
adapters train in eval mode too, is named."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from gradscope import api


class GatedAdapter(nn.Module):
    """A tanh-gated residual branch, its gate at 0 (Flamingo's gated cross-attention)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.ff = nn.Sequential(nn.Linear(dim, dim), nn.Dropout(0.1))
        self.gate = nn.Parameter(torch.zeros(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.gate.tanh() * self.ff(x)


class Host(nn.Module):
    """A small frozen 'pretrained' network with dropouts of its own."""

    def __init__(self, dim: int = 16) -> None:
        super().__init__()
        self.drop = nn.Dropout(0.1)
        self.blocks = nn.ModuleList(nn.Linear(dim, dim) for _ in range(2))
        self.head = nn.Linear(dim, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.drop(x)
        for block in self.blocks:
            x = torch.relu(block(x))
        return self.head(x)


def _train(eval_after_insert: bool) -> list:
    torch.manual_seed(0)
    host = Host()
    host.requires_grad_(False)
    host.eval()  # the frozen network, eval on purpose
    host.blocks = nn.ModuleList(nn.Sequential(GatedAdapter(16), b) for b in host.blocks)
    if eval_after_insert:
        host.eval()  # the adapters inside it switched off as well
    adapters = [p for p in host.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(adapters, lr=1e-3)
    with api.watch() as w:
        for _ in range(3):
            loss = F.cross_entropy(host(torch.randn(8, 16)), torch.randint(0, 4, (8,)))
            opt.zero_grad()
            loss.backward()
            opt.step()
    return [f for f in w.report.findings if f.rule == "GS440"]


def test_adapters_training_in_a_frozen_host_kept_in_eval_are_silent():
    assert _train(eval_after_insert=False) == []


def test_adapters_put_in_eval_with_their_host_are_named():
    (f,) = _train(eval_after_insert=True)
    assert f.subject == "Host" and any("ff.1 (Dropout)" in e for e in f.evidence)
    assert "drop (Dropout)" in " ".join(f.evidence)
