"""Every per-step field belongs to the optimizer whose parameters it is about.

Several optimizers step after one backward: a clip (its total, max_norm, `clipped`) goes to
each optimizer that steps a parameter it touched, in whatever order they step; the grad
norm of a step the clip is not for is its own parameters'; a GradScaler's scale and a
skipped step are the optimizer's that `scaler.step` ran. Each is checked against what the
script itself computed.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import gradscope


def dense_and_sparse(steps: int, sparse_first: bool) -> dict[str, list[float]]:
    """The issue's run: a dense model under Adam, an embedding under SparseAdam, a clip of
    the dense parameters only; what the script saw (the clip's total, the sparse norm)."""
    torch.manual_seed(0)
    emb = nn.Embedding(50, 8, sparse=True)
    dense = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    adam = torch.optim.Adam(dense.parameters(), lr=1e-3)
    sparse = torch.optim.SparseAdam(emb.parameters(), lr=1e-3)
    seen: dict[str, list[float]] = {"clip": [], "sparse": []}
    for _ in range(steps):
        loss = dense(emb(torch.randint(0, 50, (16,)))).pow(2).mean()
        adam.zero_grad()
        sparse.zero_grad()
        loss.backward()
        seen["sparse"].append(emb.weight.grad.coalesce().values().norm().item())
        seen["clip"].append(torch.nn.utils.clip_grad_norm_(dense.parameters(), 0.01).item())
        for opt in (sparse, adam) if sparse_first else (adam, sparse):
            opt.step()
    return seen


@pytest.mark.parametrize("sparse_first", [False, True], ids=["dense-first", "sparse-first"])
def test_a_clip_of_the_dense_parameters_is_the_dense_optimizers_only(sparse_first):
    with gradscope.watch() as w:
        seen = dense_and_sparse(6, sparse_first)
    steps = list(w.run.steps)
    names = w.run.optimizers
    by = {names[s.optimizer]: [t for t in steps if t.optimizer == s.optimizer] for s in steps}
    assert set(by) == {"Adam", "SparseAdam"} and len(steps) == 12
    assert all(s.clipped and s.max_norm == 0.01 for s in by["Adam"])
    assert [s.clip_total for s in by["Adam"]] == pytest.approx(seen["clip"], rel=1e-5)
    assert not any(s.clipped or s.max_norm is not None for s in by["SparseAdam"])
    assert [s.grad_norm for s in by["SparseAdam"]] == pytest.approx(seen["sparse"], rel=1e-5)


def test_a_clip_that_touched_both_optimizers_parameters_is_each_ones():
    torch.manual_seed(0)
    a, b = nn.Linear(4, 4), nn.Linear(4, 1)
    opt_a, opt_b = torch.optim.SGD(a.parameters(), lr=0.1), torch.optim.SGD(b.parameters(), lr=0.1)
    totals = []
    with gradscope.watch() as w:
        for _ in range(3):
            loss = b(a(torch.randn(8, 4))).pow(2).mean() * 100
            opt_a.zero_grad()
            opt_b.zero_grad()
            loss.backward()
            params = [*a.parameters(), *b.parameters()]
            totals.append(torch.nn.utils.clip_grad_norm_(params, 0.5).item())
            opt_a.step()
            opt_b.step()
    steps = list(w.run.steps)
    assert len(steps) == 6 and all(s.clipped for s in steps)
    assert [s.clip_total for s in steps] == pytest.approx([t for t in totals for _ in (0, 1)])


def test_a_scalers_scale_and_skip_are_the_optimizer_it_stepped():
    """One optimizer through a GradScaler (its first step skipped: an inf), one stepped
    directly on its own loss: scale and skipped belong to the first only."""
    torch.manual_seed(0)
    a, b = nn.Linear(4, 1), nn.Linear(4, 1)
    opt_a, opt_b = torch.optim.SGD(a.parameters(), lr=0.1), torch.optim.SGD(b.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10)
    with gradscope.watch() as w:
        for step in range(3):
            x = torch.randn(8, 4)
            loss_a = a(x).pow(2).mean() * (float("inf") if step == 0 else 1.0)
            loss_b = b(x).pow(2).mean()
            opt_a.zero_grad()
            opt_b.zero_grad()
            scaler.scale(loss_a).backward()
            loss_b.backward()
            scaler.step(opt_a)
            scaler.update()
            opt_b.step()
    assert w.run.optimizers == ("SGD", "SGD")
    first = [s for s in w.run.steps if s.optimizer == 0]
    second = [s for s in w.run.steps if s.optimizer == 1]
    assert len(first) == len(second) == 3
    assert [s.skipped for s in first] == [True, False, False]
    assert [s.scale for s in first] == [2.0**10, 2.0**9, 2.0**9]
    assert not any(s.skipped for s in second) and all(s.scale is None for s in second)
