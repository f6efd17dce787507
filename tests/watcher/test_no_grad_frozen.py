"""A module the script runs only inside torch.no_grad() (wav2vec 2.0 fine-tuning's feature
encoder under feature_grad_mult=0, its whole encoder held for freeze_finetune_updates),
its parameters still requiring grad and in the optimizer: GS413 warned that each "never
learns" and to check that it takes part in the loss. The block freezes it on purpose and
an optimizer skips a .grad of None: information that names the block. A module cut by
.detach(), or one run with gradients whose output the loss never reads, stays a warning."""

from __future__ import annotations

import torch
from torch import nn

import gradscope as gs


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(1, 8, 3, padding=1)
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)  # reads out_proj directly

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv(x.unsqueeze(1)).transpose(1, 2)
        return h + self.attn(h, h, h, need_weights=False)[0]


class Model(nn.Module):
    def __init__(self, how: str) -> None:
        super().__init__()
        self.encoder = Encoder()
        self.head = nn.Linear(8, 3)
        self.how = how
        self.updates = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.how == "no_grad" or (self.how == "warm" and self.updates < 3):
            with torch.no_grad():
                h = self.encoder(x)
        elif self.how == "detach":
            h = self.encoder(x).detach()
        elif self.how == "unused":  # the encoder runs with gradients, the loss never reads it
            self.encoder(x)
            h = x.unsqueeze(-1).expand(-1, -1, 8)
        else:
            h = self.encoder(x)
        return self.head(h)


def _gs413(how: str, evaluate: bool = False):
    torch.manual_seed(0)
    model = Model(how)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    with gs.watch() as w:
        for step in range(6):
            model.updates = step
            loss = model(torch.randn(4, 10)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if evaluate:
                with torch.no_grad():
                    model.encoder(torch.randn(2, 10))
    return [f for f in w.report.findings if f.rule == "GS413"]


def test_a_module_run_only_under_no_grad_is_told_as_frozen_by_the_block():
    found = _gs413("no_grad")
    assert {f.subject for f in found} == {
        f"encoder.{n}" for n, _ in Encoder().named_parameters()
    }  # out_proj too, read by its parent's forward inside the block
    assert all(f.severity == gs.Severity.INFO for f in found)
    assert all("inside torch.no_grad()" in f.message for f in found)
    assert all("requires_grad_(False)" in f.advice for f in found)


def test_a_freeze_for_the_first_steps_only_is_silent():
    assert _gs413("warm") == []


def test_a_module_cut_by_detach_or_left_out_of_the_loss_stays_a_warning():
    for how, evaluate in (("detach", False), ("unused", True)):
        found = _gs413(how, evaluate)
        assert found and all(f.severity == gs.Severity.WARNING for f in found), how
        assert all("takes part in the loss" in f.advice for f in found), how
