"""GS437 for a layer replaced by one of another size after the optimizer was built: a
vocabulary grown for added tokens (`resize_token_embeddings` gives the output layer a new,
longer weight) or a classifier head rebuilt for another class count. The optimizer's old
tensors had only the shapes of the same layer before, so they were read as a parameter that
never learns (GS413) beside one in no optimizer (GS411). A head replaced before the
optimizer is silent, and an unused vector the optimizer holds is no resized bias."""

from __future__ import annotations

import torch
from torch import nn

import gradscope
from gradscope.findings import Severity


class TinyLM(nn.Module):
    def __init__(self, vocab: int, classes: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, 16)
        self.body = nn.Linear(16, 16)
        self.head = nn.Linear(16, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.body(self.embed(x))))


def _train(bug: str, vocab: int = 12, classes: int = 12):
    """A tiny next-token (or class) model; `bug` says what happens around the optimizer."""
    torch.manual_seed(0)
    model = TinyLM(vocab, classes)
    grown = classes + 4 if bug in ("grown", "grown-before") else 3
    if bug == "grown-before":
        model.head = nn.Linear(16, grown)
    extra = [torch.zeros(5, requires_grad=True)] if bug == "unused-vector" else []
    params = [
        p for n, p in model.named_parameters() if not (bug == "unused-vector" and "head" in n)
    ]
    opt = torch.optim.AdamW(params + extra, lr=1e-2)
    if bug in ("grown", "new-classes"):
        model.head = nn.Linear(16, grown)
    with gradscope.watch() as w:
        for _ in range(6):
            x = torch.randint(0, vocab, (8, 6))
            logits = model(x)
            y = (x + 1) % logits.shape[-1]
            loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
            loss.backward()
            opt.step()
            opt.zero_grad()
    return w.report


def test_a_head_resized_after_the_optimizer_is_one_replacement():
    for bug, old in (("grown", "[12, 16]"), ("new-classes", "[12, 16]")):
        report = _train(bug)
        (stale,) = [f for f in report.findings if f.rule == "GS437"]
        assert stale.severity == Severity.ERROR and stale.subject == "head", stale.message
        assert "head.weight" in stale.message and "head.bias" in stale.message
        assert f"their old shapes ({old} for head.weight" in stale.message
        rest = [f for f in report.findings if f.rule in ("GS411", "GS413")]
        assert rest and all(f.explained_by == "GS437:head" for f in rest), rest


def test_a_head_resized_before_the_optimizer_is_silent():
    report = _train("grown-before")
    assert [f for f in report.findings if f.severity >= Severity.WARNING] == []


def test_an_unused_vector_beside_a_head_left_out_is_no_replacement():
    report = _train("unused-vector")
    rules = {f.rule for f in report.findings}
    assert "GS437" not in rules and {"GS411", "GS413"} <= rules, rules
