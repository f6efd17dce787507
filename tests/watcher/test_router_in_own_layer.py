"""A mixture's router sits beside its experts, in their own layer. A block's q, k, v and o
(four alike children) with rank-4 LoRA factors inside the previous block were read as a
mixture of 4 experts whose router was `blocks.0.q.lora_A`: LoRA factors both started at
zero were named an untrained router ("weigh each chosen expert by the router's
probabilities") and a ranking loss's cancelling terms. A stack of MoE layers keeps each
layer's own gate as its router."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import gradscope
from gradscope.rules.routed import routed
from gradscope.steps.records import ParamInfo, WatchRun

RANK, D = 4, 8


def _run(params: list[ParamInfo]) -> WatchRun:
    return WatchRun("t", tuple(params), [], "completed", 1.0)


def test_lora_factors_in_the_previous_block_are_no_router():
    params = [
        ParamInfo(f"blocks.{b}.{n}.{t}", shape, True, True, 0.1)
        for b in range(2)
        for n in ("q", "k", "v", "o")
        for t, shape in (("lora_A", (RANK, D)), ("lora_B", (D, RANK)))
    ]
    assert not routed(_run(params))


def test_each_moe_layer_of_a_stack_keeps_its_own_gate():
    params = [
        ParamInfo(f"layers.{b}.moe.experts.{k}.fc.weight", (D, D), True, True, 0.1)
        for b in range(2)
        for k in range(4)
    ]
    params += [ParamInfo(f"layers.{b}.moe.gate.weight", (4, D), True, True, 0.1) for b in (0, 1)]
    places = routed(_run(params))
    routers = {p.mixture.container: p.mixture.router for p in places.values()}
    assert routers == {
        "layers.0.moe.experts": "layers.0.moe.gate.weight",
        "layers.1.moe.experts": "layers.1.moe.gate.weight",
    }


class LoRA(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.base = nn.Linear(D, D).requires_grad_(False)
        self.lora_A = nn.Parameter(torch.zeros(RANK, D))  # the bug: A at zero, as B is
        self.lora_B = nn.Parameter(torch.zeros(D, RANK))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + x @ self.lora_A.t() @ self.lora_B.t()


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q, self.k, self.v, self.o = LoRA(), LoRA(), LoRA(), LoRA()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        att = torch.softmax(self.q(x) @ self.k(x).transpose(1, 2), -1)
        return x + self.o(att @ self.v(x))


def test_lora_factors_both_started_at_zero_are_named_as_such():
    torch.manual_seed(0)
    model = nn.Module()
    model.blocks = nn.Sequential(Block(), Block())
    blocks = model.blocks
    head = nn.Linear(D, 3).requires_grad_(False)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    x, y = torch.randn(6, 16, 5, D), torch.randint(0, 3, (6, 16))
    with gradscope.watch() as w:
        for i in range(6):
            opt.zero_grad()
            F.cross_entropy(head(blocks(x[i]).mean(1)), y[i]).backward()
            opt.step()
    never = [f for f in w.report.findings if f.rule == "GS413"]
    assert len(never) == 16
    for f in never:
        assert "exactly 0 at the first step" in f.message and "router" not in f.message, f
