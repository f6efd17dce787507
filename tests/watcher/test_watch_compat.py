"""Interception that stays out of the way: checkpointing, the user's hooks, in-place
ReLU, torch.compile; and nothing of it left behind afterwards."""

from __future__ import annotations

import json

import pytest
import torch
from watch_scripts import script

from gradscope.watcher import watch, watch_script


def originals():
    import torch.nn.utils as utils
    import torch.nn.utils.clip_grad as clip_grad
    from torch.optim import optimizer

    return (
        torch.Tensor.backward,
        torch.autograd.backward,
        utils.clip_grad_norm_,
        clip_grad.clip_grad_norm_,
        utils.get_total_norm,
        utils.clip_grads_with_norm_,
        torch.amp.GradScaler.scale,
        torch.amp.GradScaler.step,
        torch.optim.Optimizer.zero_grad,
        torch.nn.Module.zero_grad,
        len(optimizer._global_optimizer_pre_hooks),
        len(optimizer._global_optimizer_post_hooks),
    )


def test_checkpoint_inplace_relu_and_user_hooks_fire_once(tmp_path):
    out = tmp_path / "counts.json"
    report = watch_script(script("compat.py"), ["--out", str(out)])
    counts = json.loads(out.read_text())
    assert counts == {"tensor_hook": 6, "module_hook": 6, "post_accumulate": 6}
    assert report.run.status == "completed" and len(report.run.steps) == 6
    # the reentrant checkpoint's inner backward is not counted as the script's
    assert {r.backward_calls for r in report.run.steps} == {1}
    assert all(v is not None and v > 0 for v in report.run.steps[-1].param_norms)


@pytest.mark.slow
def test_torch_compile_no_graph_break_no_recompile(tmp_path):
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    out = tmp_path / "counts.json"
    report = watch_script(script("compat.py"), ["--compile", "--steps", "4", "--out", str(out)])
    assert len(report.run.steps) == 4 and report.run.status == "completed"
    assert dict(counters["graph_break"]) == {}
    assert counters["stats"]["unique_graphs"] == 1
    assert not counters.get("recompiles")
    assert json.loads(out.read_text())["tensor_hook"] == 4
    assert report.run.names()[:2] == ["a.0.weight", "a.0.bias"]  # no `_orig_mod.`


@pytest.mark.parametrize("how", ["raise", "interrupt", "exit"])
def test_hooks_removed_after_any_ending(how):
    before = originals()
    report = watch_script(script("crash.py"), [how])
    assert originals() == before
    assert len(report.run.steps) == 30
    assert (
        report.run.status
        == {"raise": "crashed", "interrupt": "interrupted", "exit": "crashed"}[how]
    )
    if how == "raise":
        assert report.run.error == "RuntimeError: loss assertion failed at step 30"


def test_python_api_context_manager_and_steps_limit():
    before = originals()
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with watch(steps=5) as w:
        for _ in range(50):
            loss = model(torch.randn(4, 3)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    assert originals() == before
    assert w.run.status == "stopped" and len(w.run.steps) == 5
    assert w.report.findings == [] and w.report.outcome().could_not_run is None
    assert w.run.names() == ["weight", "bias"]


def test_python_api_reraises_the_code_error_with_the_report_built():
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    w = watch()
    with pytest.raises(ValueError), w:
        for step in range(10):
            model(torch.randn(2, 3)).sum().backward()
            opt.step()
            opt.zero_grad()
            if step == 3:
                raise ValueError("boom")
    assert w.run.status == "crashed" and len(w.run.steps) == 4


def test_gradscope_watch_stays_the_api_function_once_the_subpackage_is_imported():
    import gradscope
    import gradscope.watcher

    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gradscope.watch(steps=2) as w:
        for _ in range(3):
            model(torch.randn(2, 2)).sum().backward()
            opt.step()
    assert len(w.run.steps) == 2


def test_a_closure_step_runs_the_users_closure_and_returns_its_value():
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    calls = []

    def closure():
        calls.append(1)
        opt.zero_grad()
        loss = model(torch.ones(2, 3)).sum()
        loss.backward()
        return loss

    with watch() as w:
        out = opt.step(closure)
        opt.step(closure=closure)
    assert len(calls) == 2 and isinstance(out, torch.Tensor)
    assert [r.loss for r in w.run.steps] == [pytest.approx(out.item()), w.run.steps[1].loss]
    assert all(r.grad_norm > 0 and r.backward_calls == 1 for r in w.run.steps)


def test_a_step_that_raised_does_not_swallow_the_steps_after_it():
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def closure():
        raise RuntimeError("bad batch")

    with watch() as w:
        for i in range(4):
            opt.zero_grad()
            model(torch.ones(2, 3)).sum().backward()
            if i == 1:
                with pytest.raises(RuntimeError):
                    opt.step(closure)
            else:
                opt.step()
    assert [r.step for r in w.run.steps] == [1, 2, 3]
    assert [r.backward_calls for r in w.run.steps] == [1, 2, 1]  # since the previous step


def test_a_failure_in_the_search_for_updates_by_hand_never_stops_the_script(monkeypatch):
    from gradscope.watcher import discover

    def broken(roots):
        raise RuntimeError("graph walk failed")

    monkeypatch.setattr(discover, "graph_leaves", broken)
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with watch() as w:
        for _ in range(3):
            opt.zero_grad()
            model(torch.ones(2, 3)).sum().backward()
            opt.step()
    assert w.run.status == "completed" and len(w.run.steps) == 3
    assert w.run.notes == ("updates by hand are not watched: RuntimeError: graph walk failed",)
