"""A per-parameter optimizer wrapper (Pyro's pyro.optim: one torch optimizer per tensor, built
the first time the tensor is met) over a parameter store where a running average is replaced
by a new tensor at every step (TraceGraph_ELBO's decaying-average baseline, written under
no_grad). Each average's optimizer steps once with no gradient, a step that does nothing:
GS413 told each of them as a parameter that never learns, as one of as many "trainings run
one after another". Now they are one finding at info. A stored weight the loss never reads
keeps its tensor and its optimizer: still the warning."""

from __future__ import annotations

import torch

import gradscope
from gradscope.findings import Severity


def _svi_like(unread: bool):
    torch.manual_seed(0)
    store = {"loc": torch.zeros(3, requires_grad=True), "avg": torch.zeros((), requires_grad=True)}
    if unread:
        store["forgotten"] = torch.zeros(2, requires_grad=True)
    optims: dict[torch.Tensor, torch.optim.Optimizer] = {}
    data = torch.randn(32, 3) + 1.0
    with gradscope.watch() as w:
        for _ in range(6):
            params = list(store.values())
            loss = ((data - store["loc"]) ** 2).sum(-1).mean()
            with torch.no_grad():  # the decaying average, a new tensor in the store
                store["avg"] = (0.9 * store["avg"] + 0.1 * loss).requires_grad_()
            loss.backward()
            for p in params:
                if p not in optims:
                    optims[p] = torch.optim.Adam([p], lr=0.05)
                optims[p].step()
                p.grad = None
    return [f for f in w.report.findings if f.rule == "GS413"]


def test_values_replaced_in_a_store_each_step_are_told_once_at_info():
    (found,) = _svi_like(unread=False)
    assert found.severity is Severity.INFO
    assert "more tensor(s) like it" in found.message
    assert "trainings run one after another" not in found.message


def test_a_stored_weight_the_loss_never_reads_is_still_a_warning():
    found = _svi_like(unread=True)
    assert [f.severity for f in found if "like it" not in f.message] == [Severity.WARNING]
