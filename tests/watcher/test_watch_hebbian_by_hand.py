"""GS411 on a layer a local rule moves by hand (Oja's / Sanger's Hebbian update under
no_grad) while the readout's backward still reaches it: its values change, its gradient
piles up unread, and no optimizer was meant to step it. It was an error whose advice
ended in adding it to the optimizer, which would change its learning rule; it is
information now, advising requires_grad_(False). A layer left out of the optimizer
(values never moved) is still the error."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import gradscope
from gradscope.findings import Severity


def _run(how: str):
    torch.manual_seed(0)
    hebbian, readout = torch.nn.Linear(12, 4, bias=False), torch.nn.Linear(4, 3)
    opt = torch.optim.SGD(readout.parameters(), lr=0.1)
    x_all = torch.randn(64, 12)
    with gradscope.watch() as w:
        for step in range(8):
            x = x_all[step * 8 : step * 8 + 8]
            h = hebbian(x)
            if how == "hebbian":
                with torch.no_grad():  # Sanger's rule
                    w_ = hebbian.weight
                    w_ += 0.01 * (h.t() @ x - torch.tril(h.t() @ h) @ w_) / x.shape[0]
            loss = F.cross_entropy(readout(h), torch.randint(0, 3, (8,)))
            opt.zero_grad()
            loss.backward()
            opt.step()
    return [f for f in w.report.findings if f.rule == "GS411"]


def test_a_layer_moved_by_a_hebbian_rule_is_information():
    (f,) = _run("hebbian")
    assert f.severity == Severity.INFO
    assert "piled up unread" in f.message and "requires_grad_(False)" in f.advice
    assert "would change its learning rule" in f.advice


def test_a_layer_left_out_of_the_optimizer_is_still_the_error():
    (f,) = _run("left-out")
    assert f.severity == Severity.ERROR
