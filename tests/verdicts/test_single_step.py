"""One step, judged by what training would do next: routed experts, summed losses, LoRA
initialisations, the op that cut a router's graph, and models whose tensors are not plain
floats (an int8 base, lazy modules, the meta device). Plain autograd is the oracle."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import gradscope
from gradscope import Severity


def loud(report):
    return [f for f in report.findings if f.severity >= Severity.WARNING]


def plain_grads(model, batch, loss_fn=None):
    """Which parameters get a gradient, and its norm, in plain training."""
    model.zero_grad(set_to_none=True)
    out = model(**batch) if isinstance(batch, dict) else model(batch)
    (out.loss if loss_fn is None else loss_fn(out)).backward()
    got = {n: None if p.grad is None else p.grad.norm().item() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    return got


# --- the op that cut a router's graph ----------------------------------------------------------


class Gated(nn.Module):
    """A router whose decision is made by a non-differentiable op; the next line reads a
    shape (no values leave there: it is not the cut)."""

    def __init__(self, how: str):
        super().__init__()
        self.how = how
        self.router, self.expert = nn.Linear(8, 4), nn.Linear(8, 8)

    def forward(self, x):
        logits = self.router(x)
        if self.how == "argmax":
            gate = F.one_hot(logits.argmax(-1), 4).float()  # cut: argmax
        elif self.how == "topk":
            gate = torch.zeros_like(logits).scatter(-1, logits.topk(2).indices, 1.0)  # cut: topk
        elif self.how == "long":
            gate = logits.long().clamp(0, 1).float()  # cut: long
        elif self.how == "compare":
            gate = (logits > 0).float()  # cut: >
        else:
            gate = torch.round(logits.sigmoid())  # cut: round
        width = logits.shape[-1]
        return (self.expert(x) * gate.sum(-1, keepdim=True) / width).sum()


@pytest.mark.parametrize(
    "how,op",
    [
        ("argmax", "argmax"),
        ("topk", "topk"),
        ("long", "long"),
        ("compare", "gt"),
        ("round", "round"),
    ],
)
def test_the_cut_is_blamed_on_the_op_that_made_it_at_its_own_line(how, op):
    torch.manual_seed(0)
    model, x = Gated(how), torch.randn(3, 8)
    truth = plain_grads(model, x, lambda out: out)
    report = gradscope.inspect(model, x)
    found = [f for f in report.findings if f.subject.startswith("router.")]
    assert [f.subject for f in found] == ["router.weight", "router.bias"]
    # round keeps the graph (its derivative is zero): a zero gradient, not a missing one
    assert {f.slug for f in found} == ({"zero-grad"} if how == "round" else {"none-grad"})
    assert (truth["router.weight"] == 0) if how == "round" else truth["router.weight"] is None
    source = open(__file__).read().splitlines()
    for f in found:
        (evidence,) = f.evidence
        assert f"`{op}`" in evidence or f"`__{op}__`" in evidence, evidence
        line = int(evidence.split("test_single_step.py:")[1].split()[0].rstrip(",:"))
        assert f"# cut: {'>' if op == 'gt' else op}" in source[line - 1], (
            evidence,
            source[line - 1],
        )
