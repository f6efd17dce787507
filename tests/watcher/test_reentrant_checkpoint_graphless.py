"""A rollout checkpointed step by step with torch.utils.checkpoint(use_reentrant=True) from
the data: no input requires grad, so each step's output comes back without a graph, and
the backward raises autograd's "element 0 of tensors does not require grad". GS468 blamed a
.item() or .detach(); it names the reentrant checkpoint and use_reentrant=False. The same
rollout with use_reentrant=False is silent, and a graph cut by .detach() in a run whose
evaluation checkpointed under no_grad before an earlier step keeps the plain cut."""

from __future__ import annotations

import contextlib
import warnings

import pytest
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

import gradscope


def _rollout(how: str):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 4))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    data = torch.randn(4, 3, 4)
    fails = how != "non-reentrant"
    crash = pytest.raises(RuntimeError, match="does not require grad")
    with (
        crash if fails else contextlib.nullcontext(),
        warnings.catch_warnings(),
        gradscope.watch() as w,
    ):
        warnings.simplefilter("ignore")
        for step in range(1, 4):
            if how == "detached" and step == 1:
                with torch.no_grad():  # an evaluation before training, checkpointed
                    checkpoint(model, data[:, 0], use_reentrant=True)
            x, loss = data[:, 0], 0.0
            for k in range(1, 3):
                if how == "detached":
                    x = x + (model(x).detach() if step > 1 else model(x))
                else:
                    step_fn = lambda s: s + model(s)  # noqa: E731
                    x = checkpoint(step_fn, x, use_reentrant=how == "reentrant")
                loss = loss + ((x - data[:, k]) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return {f.rule: f for f in w.report.findings}


def test_a_reentrant_checkpoint_on_the_data_is_named():
    found = _rollout("reentrant")["GS468"]
    assert found.steps == (1,) and "use_reentrant=True" in found.message
    assert "use_reentrant=False" in found.advice


def test_the_same_rollout_without_reentrant_is_silent():
    assert "GS468" not in _rollout("non-reentrant")


def test_a_detach_after_an_earlier_checkpoint_keeps_the_plain_cut():
    found = _rollout("detached")
    assert found["GS468"].steps == (2,) and "use_reentrant" not in found["GS468"].advice
