"""inspect on a model whose forward runs a module inside torch.no_grad() (fairseq's wav2vec
2.0 fine-tuning model: the feature encoder under feature_grad_mult=0): GS101 was an error,
"the graph is cut after it", for a freeze the block makes on purpose. Information now,
naming the block. A no_grad region after the module, between its output and the loss, and
a .detach() stay errors."""

from __future__ import annotations

import torch
from torch import nn

import gradscope
from gradscope.findings import Severity


class Model(nn.Module):
    def __init__(self, how: str) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv1d(1, 8, 3, padding=1), nn.GELU())
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)  # reads out_proj directly
        self.proj = nn.Linear(8, 8)
        self.head = nn.Linear(8, 3)
        self.how = how

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.how == "frozen":
            with torch.no_grad():
                h = self.encoder(x.unsqueeze(1)).transpose(1, 2)
                h = h + self.attn(h, h, h, need_weights=False)[0]
            return self.head(self.proj(h))
        h = self.encoder(x.unsqueeze(1)).transpose(1, 2)
        h = h + self.attn(h, h, h, need_weights=False)[0]
        if self.how == "detach":
            return self.head(self.proj(h.detach()))
        with torch.no_grad():  # "after": the cut is downstream of encoder and attn
            h = self.proj(h)
        return self.head(h)


def _gs101(how: str):
    torch.manual_seed(0)
    report = gradscope.inspect(Model(how), torch.randn(4, 10))
    return {f.subject: f for f in report.findings if f.rule == "GS101"}


def test_a_module_run_inside_no_grad_is_information_that_names_the_block():
    found = _gs101("frozen")
    frozen = {f"encoder.0.{k}" for k in ("weight", "bias")}
    frozen |= {f"attn.{n}" for n, _ in nn.MultiheadAttention(8, 2).named_parameters()}
    assert set(found) == frozen
    assert all(f.severity == Severity.INFO for f in found.values())
    assert all("inside torch.no_grad()" in f.message for f in found.values())
    assert all("requires_grad_(False)" in f.advice for f in found.values())


def test_a_cut_after_the_module_or_a_detach_stays_an_error():
    for how in ("after", "detach"):
        found = _gs101(how)
        assert {"encoder.0.weight", "attn.in_proj_weight"} <= set(found), how
        cut = [f for n, f in found.items() if not n.startswith("proj.")]
        assert all(f.severity == Severity.ERROR for f in cut), how
        assert all("frozen by that block" not in f.message for f in cut), how
    # the block that holds proj itself freezes proj: information, as above
    assert _gs101("after")["proj.weight"].severity == Severity.INFO
