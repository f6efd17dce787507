"""Every way real training code takes a step, recorded with the numbers of the step that
used them: each test script computes what its steps used in float64 with plain torch
(scripts/step_oracle.py) and the records must agree at every step."""

from __future__ import annotations

import json
import math

import pytest
from watch_scripts import script

from gradscope.steps.records import MANUAL
from gradscope.watcher import watch_script

REL = 1e-6
UPDATE = 1e-3
"""Adam's and SGD's updates are derived from their state (watcher/updates.py): the update
before its rounding into float32 weights, which the oracle's w_after - w_before holds
(4e-4 apart for the 1e-4 updates of step_dtypes.py's clipped SGD; test_watch_updates.py
holds the derivation to 1e-9 in float64)."""


def run(name: str, tmp_path, *argv: str, **options):
    out = tmp_path / "seen.json"
    options.setdefault("update_every", 1)
    report = watch_script(script(name), [*argv, "--out", str(out)], **options)
    assert report.run.status == "completed", report.run.error
    return report, json.loads(out.read_text())


def same(a, b, rel=REL):
    if a is None or b is None:
        return a is b
    if math.isinf(a) or math.isinf(b):
        return a == b
    return a == pytest.approx(b, rel=rel, abs=1e-12)


def check_params(record, names, expected, rel=REL):
    for name, value in expected.items():
        got = record.param_norms[names.index(name)]
        assert same(got, value, rel), (record.step, name, got, value)


# -- closures ----------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["lbfgs", "sgd", "adam", "lightning", "inside"])
def test_closure_steps_record_the_first_evaluation(tmp_path, case):
    report, seen = run("step_closure.py", tmp_path, "--case", case)
    steps, names = report.run.steps, report.run.names()
    assert len(steps) == len(seen["steps"]) == 5
    assert report.run.backward_calls == seen["backward_calls"]
    for r, s in zip(steps, seen["steps"], strict=True):
        assert same(r.loss, s["loss"]), (r.step, r.loss, s["loss"])
        assert same(r.grad_norm, s["grad_norm"]), (r.step, r.grad_norm, s["grad_norm"])
        check_params(r, names, s["params"])
        assert r.backward_calls == 1
        assert same(r.update_norm, s["update"], UPDATE)
        if case in ("lightning", "inside"):
            assert r.max_norm == 0.05 and same(r.clip_total, s["clip"], 1e-5)
            assert r.clipped == (s["clip"] > 0.05)
        else:
            assert r.max_norm is None
    if case == "lbfgs":  # its line search evaluates the closure more than once a step
        assert seen["backward_calls"] > 5


# -- several optimizers ------------------------------------------------------------------
@pytest.mark.parametrize(
    "case", ["healthy", "no_zero_d", "disjoint", "accumulate_zero_", "accumulate_none"]
)
def test_each_optimizer_step_its_own_norms_and_carried_gradients(tmp_path, case):
    report, seen = run("step_gan.py", tmp_path, "--case", case)
    run_, steps = report.run, report.run.steps
    names = run_.names()
    assert len(steps) == len(seen["steps"])
    for r, s in zip(steps, seen["steps"], strict=True):
        assert r.optimizer == s["optimizer"]
        check_params(r, names, s["params"])
        assert same(r.grad_norm, s["grad_norm"]), (r.step, r.grad_norm, s["grad_norm"])
        if s["calls"]:
            assert same(r.loss, s["loss"]), (r.step, r.loss, s["loss"])
        assert r.backward_calls == s["calls"]
        assert same(r.update_norm, s["update"], UPDATE)
        if s["carried"] is None:
            assert r.carried_norm is None, (r.step, r.carried_norm)
        else:
            assert same(r.carried_norm, s["carried"]), (r.step, r.carried_norm, s["carried"])
    for k in range(len(run_.optimizers)):  # members: exactly the parameters each one steps
        own = {n for s in seen["steps"] if s["optimizer"] == k for n in s["params"]}
        assert {names[i] for i in run_.members[k]} == own
    carried = [r.step for r in steps if (r.carried_norm or 0) > 0]
    ids = {f.rule for f in report.findings}
    if case == "no_zero_d":  # D's steps after its first, only
        assert carried == [r.step for r in steps if r.optimizer == 0][1:]
    else:
        assert carried == [] and "GS412" not in ids
    if case == "accumulate_zero_":  # zeroed by hand: a norm taken, and it is 0
        assert [r.carried_norm for r in steps[1:]] == [0.0] * (len(steps) - 1)


def test_accumulation_with_grads_set_to_none_takes_no_norm_at_backward(monkeypatch):
    import torch

    from gradscope.watcher import resets, stepping, watch

    calls = []
    real = resets.norms
    for module in (resets, stepping):  # the norms at a backward's start and of the weights
        monkeypatch.setattr(module, "norms", lambda t, *a: calls.append(len(t)) or real(t, *a))
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with watch(update_every=1000) as w:
        for _ in range(6):
            for _ in range(8):
                model(torch.randn(2, 4)).sum().backward()
            opt.step()
            opt.zero_grad()
    assert len(w.run.steps) == 6
    assert (
        calls == [2] * 6
    )  # the weights of each measured step (all the first 100); none at a backward


# -- updates by hand ---------------------------------------------------------------------
@pytest.mark.parametrize("case", ["data", "sub", "add", "copy", "accumulate", "none"])
def test_updates_by_hand_are_steps_with_the_gradients_they_used(tmp_path, case):
    report, seen = run("step_manual.py", tmp_path, "--case", case)
    run_, steps = report.run, report.run.steps
    names = run_.names()
    assert run_.backward_calls == (18 if case == "accumulate" else 6)
    assert len(steps) == len(seen["steps"]) == (0 if case == "none" else 6)
    if case == "none":
        assert run_.optimizers == ()
        return
    assert run_.optimizers == (MANUAL,)
    assert set(names) == {"encoder.weight", *(n for n in seen["steps"][0]["params"])}
    assert {names[i] for i in run_.members[0]} == set(seen["steps"][0]["params"])
    assert all(p.in_optimizer for p in run_.params)
    for r, s in zip(steps, seen["steps"], strict=True):
        assert r.optimizer == 0 and r.backward_calls == s["calls"]
        assert same(r.loss, s["loss"]), (r.step, r.loss, s["loss"])
        check_params(r, names, s["params"])
        assert same(r.grad_norm, s["grad_norm"]), (r.step, r.grad_norm, s["grad_norm"])
        assert same(r.update_norm, s["update"], UPDATE), (r.step, r.update_norm, s["update"])
        if s["clip"] is not None:
            assert r.max_norm == 0.25 and same(r.clip_total, s["clip"], 1e-5)
            assert r.clipped == (s["clip"] > 0.25)


def test_updates_by_hand_sampled_every_n_and_steps_limit(tmp_path, monkeypatch):
    from gradscope.watcher import updates

    monkeypatch.setattr(updates, "DENSE_STEPS", 2)  # every one of the first 2, then every 4
    out = tmp_path / "seen.json"
    report = watch_script(
        script("step_manual.py"), ["--case", "data", "--out", str(out)], update_every=4, steps=5
    )
    steps = report.run.steps
    assert report.run.status == "stopped" and len(steps) == 5
    assert [r.step for r in steps if r.update_norm is not None] == [1, 2, 5]


# -- every dtype -------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["float64", "mixed", "huge", "inf_clip"])
def test_every_dtype_and_norm_type(tmp_path, case):
    report, seen = run("step_dtypes.py", tmp_path, "--case", case)
    steps, names = report.run.steps, report.run.names()
    assert len(steps) == len(seen["steps"]) == 5
    for r, s in zip(steps, seen["steps"], strict=True):
        check_params(r, names, s["params"])
        assert same(r.grad_norm, s["grad_norm"]), (r.step, r.grad_norm, s["grad_norm"])
        assert same(r.loss, s["loss"]), (r.step, r.loss, s["loss"])
        assert same(r.update_norm, s["update"], UPDATE), (r.step, r.update_norm, s["update"])
        assert all(v is not None and math.isfinite(v) for v in r.param_norms)
        if s["clip"] is not None:
            assert r.max_norm == 1e-3 and r.clipped
            assert same(r.clip_total, s["clip"], 1e-5)
            assert same(r.clipped_norm, s["clipped"], 1e-4), (r.clipped_norm, s["clipped"])
            assert r.norm_type == (math.inf if case == "inf_clip" else 2.0)
    if case == "inf_clip":
        assert report.to_dict()["summary"]["clipped_steps"] == 5
    assert "GS401" not in {f.rule for f in report.findings}  # nothing non-finite


# -- AMP: a clip before unscale_ ---------------------------------------------------------
AMP = [(case, "bfloat16") for case in ("wrong", "right", "noclip", "fused_wrong", "fused_right")]
AMP += [("skip", "bfloat16"), ("wrong", "float16"), ("right", "float16")]


@pytest.mark.parametrize(("case", "dtype"), AMP)
def test_clip_of_scaled_gradients_flagged_and_every_number_unscaled(tmp_path, case, dtype):
    log = tmp_path / "steps.jsonl"
    report, seen = run("step_amp.py", tmp_path, "--case", case, "--dtype", dtype, log=str(log))
    steps, names = report.run.steps, report.run.names()
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    logged = [line for line in lines if "step" in line]
    assert len(steps) == len(seen["steps"]) == len(logged) == 6
    scaled = case in ("wrong", "fused_wrong", "skip")
    for r, s, line in zip(steps, seen["steps"], logged, strict=True):
        assert r.scaled_clip == scaled, r.step
        assert r.skipped == s["skipped"] and r.scale == s["scale"]
        assert same(r.loss, s["loss"]), (r.step, r.loss, s["loss"])
        if s["skipped"]:
            continue
        check_params(r, names, s["params"], 1e-5)
        for name, value in s["params"].items():  # the --log too
            assert same(line["param_norms"][names.index(name)], value, 1e-5)
        assert same(r.grad_norm, s["grad_norm"], 1e-5), (r.step, r.grad_norm, s["grad_norm"])
        if s["clip"] is None:
            assert r.max_norm is None and r.clipped_norm is None
        else:
            assert same(r.clip_total, s["clip"], 1e-5), (r.step, r.clip_total, s["clip"])
            assert same(r.clipped_norm, s["clipped"], 1e-4), (r.clipped_norm, s["clipped"])
            assert r.clipped == (s["clip"] * (s["scale"] if scaled else 1) > 1.0)
    if case == "skip":
        assert [r.step for r in steps if r.skipped] == [3]


def test_leaf_tensors_updated_by_hand_named_as_the_script_names_them(tmp_path):
    report, seen = run("step_tensors.py", tmp_path)
    steps, names = report.run.steps, report.run.names()
    assert sorted(names) == ["b", "w"] and report.run.optimizers == (MANUAL,)
    assert len(steps) == len(seen["steps"]) == 5
    for r, s in zip(steps, seen["steps"], strict=True):
        assert same(r.loss, s["loss"]) and same(r.grad_norm, s["grad_norm"])
        check_params(r, names, s["params"])
        assert same(r.update_norm, s["update"], UPDATE)


def test_updates_by_hand_that_turn_the_weights_nan_say_later_steps_may_be_missing():
    import torch

    from gradscope.watcher import watch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    with watch() as w:
        for _ in range(60):
            loss = model(torch.randn(3, 4)).pow(2).mean()
            model.zero_grad()
            loss.backward()
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-5.0)
    first = next(r.step for r in w.run.steps if not math.isfinite(r.grad_norm))
    assert w.run.backward_calls == 60 and first < len(w.run.steps) < 60
    nan_at = next(r.step for r in w.run.steps if r.loss is not None and math.isnan(r.loss))
    assert w.run.notes[0].startswith(f"weights updated by hand became NaN at step {nan_at - 1}")


def test_a_norm_taken_after_the_scaler_stepped_is_not_a_scaled_clip():
    import torch

    from gradscope.watcher import watch

    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    with watch() as w:
        for _ in range(4):
            opt.zero_grad()
            scaler.scale(model(torch.randn(2, 4)).sum()).backward()
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
            torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])  # a log
    assert [r.scaled_clip for r in w.run.steps] == [False] * 4


def test_a_norm_logged_after_the_step_is_not_the_next_steps_clip():
    import torch

    from gradscope.watcher import watch

    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with watch() as w:
        for _ in range(3):
            opt.zero_grad()
            model(torch.randn(2, 4)).sum().backward()
            opt.step()
            torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])  # a log
    assert [(r.clip_total, r.norm_type, r.max_norm) for r in w.run.steps] == [(None,) * 3] * 3
