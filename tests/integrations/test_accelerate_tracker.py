"""The accelerate tracker in a real accelerate loop (Accelerator, prepare, backward,
clip_grad_norm_, log, save_state/load_state): the same rule ids as `gradscope.watch()`
around the same loop, nothing on a healthy one, the stop through accelerate's trigger,
the resume, the outputs, a crash inside `with tracker:`."""

from __future__ import annotations

import json
import logging
import math

import pytest

accelerate = pytest.importorskip("accelerate")

pytestmark = pytest.mark.slow

BAD = ("error", "warning")


def _loop(tracker=None, steps=30, bug=None, save=None, load=None, clip=None, start=0):
    """A regression trained the accelerate way; returns the steps it ran."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(8 * 64, 8, generator=g)
    data = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True) / 3), batch_size=8
    )
    acc = accelerate.Accelerator(cpu=True, log_with=[tracker] if tracker else None)
    model, opt, data = acc.prepare(model, opt, data)
    if tracker is not None:
        tracker.accelerator = acc
        acc.register_for_checkpointing(tracker)
        acc.init_trackers("gradscope-test")
    if load is not None:
        acc.load_state(load)
    ran = 0
    for i, (xb, yb) in enumerate(data):
        if i < start:
            continue
        if i >= steps:
            break
        loss = torch.nn.functional.mse_loss(model(xb), yb)
        if bug == "nan" and i >= 6:
            loss = loss * float("nan")
        if bug == "raise" and i == 4:
            raise RuntimeError("a corrupt shard")
        acc.backward(loss)
        if clip is not None:
            acc.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        if bug != "no-zero-grad":
            opt.zero_grad()
        ran += 1
        acc.log({"loss": float(loss)}, step=i)
        if save is not None and i + 1 == save[1]:
            acc.save_state(save[0])
        if acc.check_trigger():
            break
    acc.end_training()
    return ran


def _rules(report) -> set[str]:
    return {f.rule for f in report.findings if str(f.severity) in BAD and not f.ignored_by}


def test_missing_zero_grad_same_rule_as_watch_said_as_it_happens(caplog, every_step):
    import gradscope
    from gradscope.integrations.accelerate import GradscopeTracker

    tracker = GradscopeTracker()
    with caplog.at_level(logging.WARNING, logger="gradscope"):
        _loop(tracker, bug="no-zero-grad")
    assert "GS412" in _rules(tracker.report)
    with gradscope.watch() as w:
        _loop(bug="no-zero-grad")
    assert _rules(tracker.report) == _rules(w.report)
    said = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("gradscope GS412 error at step") for m in said), said


def test_healthy_loop_no_warning_clip_seen_and_outputs_written(tmp_path, caplog, every_step):
    from gradscope.integrations.accelerate import GradscopeTracker

    names = [tmp_path / "r.json", tmp_path / "r.md", tmp_path / "run.svg"]
    tracker = GradscopeTracker(outputs=[str(n) for n in names], flush_every=1)
    with caplog.at_level(logging.WARNING, logger="gradscope"):
        _loop(tracker, steps=30, clip=5.0)
    assert _rules(tracker.report) == set()
    assert tracker.watch.live.judgements >= 25  # judged as it went, and nothing said
    assert not [r for r in caplog.records if "gradscope" in r.getMessage()]
    steps = list(tracker.report.run.steps)
    assert len(steps) == 30 and {s.max_norm for s in steps} == {5.0}
    assert len(json.loads(names[0].read_text())["steps"]) == 30
    assert names[1].read_text() and names[2].read_text().lstrip().startswith("<")


def test_stop_on_error_through_the_trigger_with_the_partial_report(tmp_path, every_step):
    from gradscope.integrations.accelerate import GradscopeTracker

    out = tmp_path / "r.json"
    tracker = GradscopeTracker(outputs=[str(out)], stop_on_error=True, flush_every=1)
    ran = _loop(tracker, steps=50, bug="nan")
    assert ran < 50
    assert tracker.report.run.status == "stopped"
    assert "GS401" in {f["rule"] for f in json.loads(out.read_text())["findings"]}


def test_resume_through_save_state_and_load_state(tmp_path):
    from gradscope.integrations.accelerate import GradscopeTracker

    first = GradscopeTracker()
    _loop(first, steps=8, save=(str(tmp_path / "ckpt"), 8))
    second = GradscopeTracker()
    _loop(second, steps=16, load=str(tmp_path / "ckpt"), start=8)
    steps = list(second.report.run.steps)
    assert [s.step for s in steps] == list(range(1, 17))
    assert [s.grad_norm for s in steps[:8]] == [s.grad_norm for s in first.report.run.steps]
    assert all(math.isfinite(s.grad_norm) for s in steps)


def test_a_crash_inside_with_tracker_writes_the_partial_report(tmp_path):
    from gradscope.integrations.accelerate import GradscopeTracker

    out = tmp_path / "r.json"
    tracker = GradscopeTracker(outputs=[str(out)])
    with pytest.raises(RuntimeError, match="corrupt shard"), tracker:
        _loop(tracker, steps=10, bug="raise")
    assert tracker.report.run.status == "crashed"
    assert len(json.loads(out.read_text())["steps"]) == 4
