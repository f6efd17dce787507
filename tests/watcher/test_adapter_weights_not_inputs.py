"""Adapter weights written by hand on a module that wraps a frozen layer (LoRA's A and B,
(IA)^3's scaling vector) were read as inputs optimised beside a fixed network, like a soft
prompt: a run that ascended its cross-entropy through them was called an untargeted attack
("nothing to fix", information). They are the wrapped layer's weights: the negated loss is
an error. A soft prompt wrapped around a frozen input embedding, and a perturbation of the
frozen network's input, stay inputs: their ascent is still information."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import gradscope
from gradscope.findings import Severity

D, CLASSES, STEPS = 8, 4, 30


class LoRA(nn.Module):
    """A frozen Linear with a trained low-rank update B @ A (B starts at zero)."""

    def __init__(self, base: nn.Linear, rank: int = 2) -> None:
        super().__init__()
        self.base = base
        self.lora_A = nn.Parameter(torch.randn(rank, base.in_features) / base.in_features**0.5)
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + x @ self.lora_A.t() @ self.lora_B.t()


class IA3(nn.Module):
    """A frozen Linear whose output a trained vector rescales."""

    def __init__(self, base: nn.Linear) -> None:
        super().__init__()
        self.base = base
        self.scale = nn.Parameter(torch.ones(base.out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) * self.scale


class SoftEmbedding(nn.Module):
    """A frozen token embedding with a trained prompt in front of the tokens it looks up."""

    def __init__(self, wte: nn.Embedding, tokens: int = 3) -> None:
        super().__init__()
        self.wte = wte
        self.prompt = nn.Parameter(torch.randn(tokens, wte.embedding_dim) * 0.5)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.prompt.expand(len(ids), -1, -1), self.wte(ids)], 1)


def _ascended(adapter: str) -> list:
    torch.manual_seed(0)
    wte = nn.Embedding(16, D)
    net = nn.Sequential(nn.Linear(D, D), nn.Tanh(), nn.Linear(D, CLASSES))
    for p in [*wte.parameters(), *net.parameters()]:
        p.requires_grad_(False)
    embed: nn.Module = wte
    if adapter == "lora":
        net[0] = LoRA(net[0])
    elif adapter == "ia3":
        net[2] = IA3(net[2])
    else:
        embed = SoftEmbedding(wte)
    trained = [p for m in (embed, net) for p in m.parameters() if p.requires_grad]
    opt = torch.optim.Adam(trained, lr=0.05)
    ids, y = torch.randint(0, 16, (STEPS, 32, 5)), torch.randint(0, CLASSES, (STEPS, 32))
    with gradscope.watch() as w:
        for i in range(STEPS):
            opt.zero_grad()
            loss = -F.cross_entropy(net(embed(ids[i]).mean(1)), y[i])
            loss.backward()
            opt.step()
    return [f for f in w.report.findings if f.rule == "GS418"]


@pytest.mark.parametrize("adapter", ["lora", "ia3"])
def test_a_negated_loss_trained_through_adapter_weights_is_an_error(adapter):
    (found,) = _ascended(adapter)
    assert found.severity == Severity.ERROR, found
    assert "untargeted attack" not in found.message
    assert found.advice.startswith("minimise the cross-entropy itself")


def test_a_soft_prompt_on_a_frozen_embedding_is_still_an_input():
    (found,) = _ascended("prompt")
    assert found.severity == Severity.INFO, found
    assert "what an untargeted attack" in found.message
