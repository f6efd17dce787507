"""The hosts' shared core on a plain loop (no host): what is said live and what waits
for the end, the checkpoint state through JSON, outputs that cannot be written."""

from __future__ import annotations

import json
import logging
import math

import pytest


def _loop(watch, steps=30, lr=0.05, nan_at=None, poll=True):
    import torch

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(net.parameters(), lr=lr)
    g = torch.Generator().manual_seed(0)
    for i in range(steps):
        x = torch.randn(16, 8, generator=g)
        loss = torch.nn.functional.mse_loss(net(x), x.sum(1, keepdim=True) / 3)
        if nan_at is not None and i >= nan_at:
            loss = loss * float("nan")
        opt.zero_grad()
        loss.backward()
        opt.step()
        if poll:
            watch.poll()


def _host(**given):
    from gradscope.integrations.core import HostWatch

    said: list[tuple[int, str]] = []
    watch = HostWatch(say=lambda level, text: said.append((level, text)), **given)
    return watch, said


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def test_live_says_a_nan_step_once_and_never_a_whole_run_verdict(every_step):
    watch, said = _host(flush_every=1)
    watch.start()
    _loop(watch, steps=40, lr=0.0, nan_at=30)
    report = watch.end()
    final = {f.rule for f in report.findings if str(f.severity) in ("error", "warning")}
    live = [text for level, text in said if text.startswith("gradscope GS")]
    assert "GS410" in final  # updates too small at lr 0: a verdict over the whole run...
    assert not any(t.startswith("gradscope GS410") for t in live)  # ...never said live
    assert [t for t in live if t.startswith("gradscope GS401")] == [live[0]]
    assert live[0].startswith("gradscope GS401 error at step 31")
    assert {f.rule for f in watch.findings} <= final


def test_stop_requested_only_when_asked(every_step):
    for stop in (False, True):
        watch, _ = _host(flush_every=1, stop_on_error=stop)
        watch.start()
        _loop(watch, steps=12, nan_at=5)
        assert watch.stop_requested is stop
        assert watch.end().run.status == ("stopped" if stop else "completed")


def test_a_logger_that_fails_is_said_once_and_the_others_still_get_each_finding(every_step):
    watch, said = _host(flush_every=1)
    got: list[str] = []

    def broken(f):
        raise OSError("disk full")

    watch.channels = [broken, lambda f: got.append(f.rule)]
    watch.start()
    _loop(watch, steps=12, nan_at=5)
    watch.end()
    assert got == [f.rule for f in watch.findings] and "GS401" in got  # each once
    lost = [text for _, text in said if "a logger took no finding" in text]
    assert lost == ["gradscope: a logger took no finding: disk full"]


def test_checkpoint_state_survives_json_with_nan_and_inf():
    from gradscope.watcher.resume import Resume

    watch, _ = _host(flush_every=3)
    watch.start()
    _loop(watch, steps=8, nan_at=6, poll=False)
    state = watch.state_dict()  # mid-run: the pending steps read back first
    assert state["steps"] == 8 and len(state["records"]) == 8
    back = Resume.of(json.loads(json.dumps(state, allow_nan=False)))
    report = watch.end()
    for got, want in zip(back.records, report.run.steps, strict=True):
        for name, value in want.to_dict().items():
            assert _same(got.to_dict()[name], value), name
    assert not math.isfinite(back.records[-1].grad_norm)


def test_a_resumed_watch_numbers_on_and_keeps_the_earlier_series():
    first, _ = _host()
    first.start()
    _loop(first, steps=5, poll=False)
    state = json.loads(json.dumps(first.state_dict()))
    earlier = first.end()
    second, _ = _host()
    second.load_state_dict(state)
    second.start()
    _loop(second, steps=4, poll=False)
    steps = list(second.end().run.steps)
    assert [s.step for s in steps] == list(range(1, 10))
    assert [s.grad_norm for s in steps[:5]] == [s.grad_norm for s in earlier.run.steps]
    second.start()  # the same callback's next run, from no checkpoint: afresh
    _loop(second, steps=2, poll=False)
    assert [s.step for s in second.end().run.steps] == [1, 2]


def test_a_resume_past_the_kept_detail_keeps_every_step():
    """A long run's store keeps the per-tensor detail of 1024 steps per optimizer: the
    steps it let go are restored with their totals (they failed the watch's start)."""
    from dataclasses import replace

    from gradscope.watcher.resume import Resume

    first, _ = _host()
    first.start()
    _loop(first, steps=6, poll=False)
    records = list(first.end().run.steps)
    gone = [replace(r, detail=False, param_norms=(), update_ratios=None) for r in records[1:4]]
    state = {"gradscope": 1, **Resume((records[0], *gone, *records[4:]), 6).state()}
    second, said = _host()
    second.load_state_dict(json.loads(json.dumps(state)))
    second.start()
    _loop(second, steps=3, poll=False)
    steps = list(second.end().run.steps)
    assert not [t for _, t in said if "failed" in t], said
    assert [s.step for s in steps] == list(range(1, 10))
    assert [s.grad_norm for s in steps[:6]] == [r.grad_norm for r in records]
    assert [s.detail for s in steps[:6]] == [True, False, False, False, True, True]


def test_an_unwritable_output_is_said_never_raised(tmp_path):
    good = tmp_path / "r.json"
    watch, said = _host(outputs=[str(tmp_path / "gone" / "r.md"), str(good), "/dev/full"])
    watch.start()
    _loop(watch, steps=3, poll=False)
    watch.end()
    assert json.loads(good.read_text())["kind"] == "watch"
    failed = [t for level, t in said if level == logging.WARNING and "not written" in t]
    assert len(failed) == 2 and "gone" in failed[0] and "/dev/full" in failed[1], said


def test_no_outputs_logs_the_report_and_a_watch_never_started_ends_as_none():
    watch, said = _host()
    assert watch.end() is None and watch.state_dict()["records"] == []
    watch.start()
    _loop(watch, steps=3, poll=False)
    watch.end()
    assert any("verdict" in t for _, t in said)


def test_a_failure_of_gradscope_own_never_reaches_the_training(monkeypatch):
    from gradscope.rules import watch as judging

    watch, said = _host()
    monkeypatch.setattr("gradscope.integrations.core.api.watch", _broken)
    watch.start()  # the training runs on, unwatched
    _loop(watch, steps=3)
    assert watch.end() is None and not watch.active
    monkeypatch.undo()
    watch, said_at_end = _host()
    watch.start()
    _loop(watch, steps=3, poll=False)
    monkeypatch.setattr(judging, "diagnose", _broken)
    assert watch.end() is None and not watch.active
    lines = [t for _, t in said + said_at_end]
    assert any("not watching, starting failed: a bug" in t for t in lines), lines
    assert any("the report was lost: a bug" in t for t in lines), lines


def _broken(*args, **kwargs):
    raise RuntimeError("a bug")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gradscope.integrations.core", "gradscope.integrations.live"])
def test_the_core_imports_no_host(name):
    import subprocess
    import sys

    hosts = "('lightning', 'transformers', 'accelerate')"
    code = f"import {name}, sys; print(sorted(m for m in {hosts} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
