"""`gradscope watch` under torchrun, 2 gloo ranks (slow: a launch is two processes).

Launches are shared between assertions: each one runs a plain DDP or FSDP2 loop with
the bugs that can go together without one hiding another (`--bug a,b`), and the JSON
report is read once for all of them. The runs that are not about torchrun's own part (a
rank's failure seen by torchrun, the launcher's exit code) share one launch besides, with
test_dist_stop.py's (`shared`, tests/distributed/shared_launch.py): one DDP reduction
error keeps a launch of its own, so that torchrun's handling of it stays tested, and
test_dist_stop.py has a rank's failure handed over to rank 0 under torchrun. `gradscope
inspect --script` on an FSDP2 run is one of the shared runs too.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys

import pytest
import shared_launch
import torchrun_launch

pytestmark = pytest.mark.slow
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DDP = os.path.join(ROOT, "gradscope", "examples", "ddp_train.py")
SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts")
FSDP = os.path.join(SCRIPTS, "fsdp_reference_train.py")
NOISE = os.path.join(SCRIPTS, "noise_ddp_train.py")
CRASH = os.path.join(SCRIPTS, "crash_rank_branch.py")
COMPILED = os.path.join(SCRIPTS, "compiled_ddp_train.py")
FSDP_EXAMPLE = os.path.join(ROOT, "gradscope", "examples", "fsdp_train.py")
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]


def run(cmd, **kw):
    return torchrun_launch.run(cmd, timeout=180, cwd=ROOT, **kw)


def watch_json(tmp_path, script, *args, watch_args=()):
    """torchrun -m gradscope watch SCRIPT -f json -o FILE -- ARGS: (process, report or None)."""
    out = tmp_path / "report.json"
    proc = run(
        [
            *(*TORCHRUN, "-m", "gradscope", "watch", script, *watch_args),
            *("-f", "json", "-o", str(out), "--", *args),
        ]
    )
    return proc, (json.loads(out.read_text()) if out.exists() else None)


SHARED_REDUCTIONS = ("unused,detached", "reentrant")
"""The DDP reduction errors run in the shared launch ("rank-branch,dropped-output" under
torchrun's own watch)."""


def _shared_plan(tmp) -> dict[str, list[str]]:
    """The shared runs' arguments, each writing its report to `tmp`/NAME.json."""
    runs = {
        "healthy": (DDP, ("--log", str(tmp / "steps.jsonl"), "--width", "200"), ("--bug", "none")),
        "fsdp2": (
            FSDP,
            ("--update-every", "1"),
            ("--reference", str(tmp / "reference.json"), "--clip", "0.5"),
        ),
        "unused": (DDP, (), ("--find-unused", "--bug", "unused,rank-branch,skip")),
        "noise": (NOISE, (), ("--out", str(tmp / "seen.json"))),
        **{bugs: (DDP, (), ("--bug", bugs)) for bugs in SHARED_REDUCTIONS},
        # a rank that dies alone: its failure reaches rank 0 through the store, not
        # torchrun (test_dist_stop.py has it under torchrun's watch)
        "crash_alone": (CRASH, (), ()),
        "crash_late": (CRASH, (), ("late",)),
        "compiled": (COMPILED, (), ()),
    }
    plan = {
        name: ["watch", script, *watch_args, *_json(tmp / f"{name}.json", name), "--", *args]
        for name, (script, watch_args, args) in runs.items()
    }
    # `torchrun -m gradscope inspect --script` on FSDP2 (test_fsdp2_inspect_...)
    plan["inspect"] = [
        *("inspect", FSDP_EXAMPLE, "--script"),
        *("-f", "json", "-o", str(tmp / "inspect.json")),
    ]
    return plan


shared_launch.share("watch", _shared_plan)


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """The runs of `torchrun -m gradscope watch SCRIPT -f json -o FILE -- ARGS` (the
    healthy one's report on stdout) that need nothing of torchrun but its environment, in
    the shared launch (with test_dist_stop.py's runs where it runs too): the folder and
    {name: (process, report)}."""
    tmp, found, launch = shared_launch.shared("watch", tmp_path_factory)
    out = {}
    for name, run in found.items():
        assert run is not None, launch.stderr[-3000:]
        report = tmp / f"{name}.json"
        out[name] = (run, json.loads(report.read_text()) if report.exists() else None)
    return tmp, out


def _json(path, name):
    """The healthy run's report is the text one, on stdout; the others' a JSON file."""
    return () if name == "healthy" else ("-f", "json", "-o", str(path))


def by_rule(doc, rule):
    return {f["subject"]: f for f in doc["findings"] if f["rule"] == rule}


def test_healthy_ddp_watch_reports_once_from_rank_0(shared):
    """The text report, from rank 0 alone. (`--log` through torchrun's own parser, which
    would take it for its --log-dir without the `--` of `-m -- gradscope`: every launch
    of test_dist_stop.py passes it so, through `--nproc-per-node`.)"""
    tmp, runs = shared
    log = tmp / "steps.jsonl"
    proc, _ = runs["healthy"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("gradscope watch · script") == 1  # rank 1 prints no report
    assert "No findings." in proc.stdout  # no GS506 either: two honest shards differ, mildly
    summary = re.search(
        r"DDP on 2 ranks \(gloo\), (\d+) gathering\(s\), (\d+) collective", proc.stdout
    )
    assert summary, proc.stdout
    assert summary.group(1) == summary.group(2) == "2"  # one collective each
    assert re.search(r"local grad norm \(pre all-reduce\)\s+[\d.]+\s+[\d.]+\n", proc.stdout)
    assert "6 optimizer steps" in proc.stdout
    lines = log.read_text().splitlines()  # one writer: a header, a line per step, findings
    assert len(lines) == 8 and json.loads(lines[0])["params"]
    assert json.loads(lines[-1]) == {"findings": []}
    assert "rank 1 done" in proc.stderr  # the script's own prints go to stderr
    assert "Traceback" not in proc.stderr


def test_fsdp2_watch_norms_and_update_ratios_are_the_unsharded_ones(shared):
    tmp, runs = shared
    ref = tmp / "reference.json"
    proc, doc = runs["fsdp2"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    want = json.loads(ref.read_text())
    assert doc["findings"] == []
    assert "FSDP2 on 2 ranks (gloo)" in doc["summary"]["notes"][0]
    names = [p["name"] for p in doc["params"]]
    assert len(doc["steps"]) == len(want) == 4
    for step, reference in zip(doc["steps"], want, strict=True):
        total = reference.pop("total")  # clip_grad_norm_'s global total on the FSDP2 model
        updates, weights = reference.pop("updates"), reference.pop("weights")
        *library, library_total, library_clip = reference.pop("library")  # norms.global_grad_norms
        got = dict(zip(names, step["param_norms"], strict=True))
        assert got.keys() == reference.keys()
        for name, value in reference.items():  # before clipping, unsharded reference
            assert abs(got[name] - value) <= 1e-6 * value, (name, got[name], value)
        summed = sum(v * v for v in reference.values()) ** 0.5
        for value, want_value in zip(library, reference.values(), strict=True):
            assert abs(value - want_value) <= 1e-6 * want_value
        assert abs(library_total - summed) <= 1e-6 * summed
        assert abs(library_clip - min(1.0, 0.5 / (summed + 1e-6))) <= 1e-6
        assert abs(total - summed) <= 1e-6 * summed
        assert abs(step["grad_norm"] - summed) <= 1e-6 * summed
        coefficient = min(1.0, 0.5 / (summed + 1e-6))  # the global clip coefficient
        assert abs(step["clipped_norm"] - summed * coefficient) <= 1e-6 * step["clipped_norm"]
        # update/weight ratios of the full parameters, not of the local shards
        ratios = dict(zip(names, step["update_ratios"], strict=True))
        for name in names:
            expected = updates[name] / weights[name]
            assert abs(ratios[name] - expected) <= 1e-5 * expected, (name, ratios[name], expected)
        update = sum(v * v for v in updates.values()) ** 0.5
        assert abs(step["update_norm"] - update) <= 1e-5 * update


def test_a_compiled_ddp_model_keeps_gradscope_out_of_dynamo(shared):
    """torch.compile(DDP(model)): gradscope's hooks on the DDP model, its modules and the
    optimizer were traced by dynamo (its warnings, naming gradscope's files, on the
    script's stderr; recompilations at the watch's counters)."""
    _, runs = shared
    proc, report = runs["compiled"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert report is not None and len(report["steps"]) == 8
    assert "gradscope/" not in proc.stderr, proc.stderr[-3000:]
    assert "recompile" not in proc.stderr.lower()
    assert "global hooks" not in proc.stderr  # torch's warning about gradscope's own hook


def test_bad_shard_and_perturbed_rank_are_named_through_nproc_per_node(tmp_path):
    out = tmp_path / "report.json"
    proc = run(
        [
            *(sys.executable, "-m", "gradscope", "watch", DDP, "--nproc-per-node", "2"),
            *("-f", "json", "-o", str(out), "--", "--bug", "bad-shard,perturb"),
        ]
    )
    assert proc.returncode == 1, proc.stderr[-3000:]  # findings: rank 0's code, not torchrun's
    # the run reported itself: no torchrun failure report that reads as a crash
    assert "ChildFailedError" not in proc.stderr and "Root Cause" not in proc.stderr
    doc = json.loads(out.read_text())
    outliers = by_rule(doc, "GS506")
    assert list(outliers) == ["rank 1"]  # the rank whose targets are off, not rank 0
    assert "rank 0: 1.5" in outliers["rank 1"]["message"]
    assert "rank 1's data shard" in outliers["rank 1"]["advice"]
    divergent = by_rule(doc, "GS505")
    assert list(divergent) == ["block.weight"]
    assert "rank 1 disagrees" in divergent["block.weight"]["message"]
    assert by_rule(doc, "GS507") == {}
    assert doc["summary"]["status"] == "completed"


def test_find_unused_run_names_unused_rank_dependent_and_skipped(shared):
    proc, doc = shared[1]["unused"]
    assert proc.returncode == 1, proc.stderr[-3000:]
    unused = by_rule(doc, "GS501")
    assert set(unused) == {"aux.weight", "aux.bias"}
    assert "never ran" in unused["aux.weight"]["message"]
    assert "freeze" in unused["aux.weight"]["advice"]
    ranked = by_rule(doc, "GS502")
    assert set(ranked) == {"block.weight", "block.bias"}
    assert "on rank 0 only" in ranked["block.weight"]["message"]
    assert "ranks train different models" in ranked["block.weight"]["advice"]
    assert list(by_rule(doc, "GS507")) == ["rank 1"]
    assert by_rule(doc, "GS506") == {} and by_rule(doc, "GS503") == {}
    notes = "\n".join(doc["summary"]["notes"])
    assert re.search(r"optimizer steps\s+6\s+5", notes)  # per-rank columns where ranks differ
    dist = doc["distributed"]  # the same, machine-readable: a list only where ranks differ
    assert (dist["world"], dist["layout"], dist["backend"]) == (2, "DDP", "gloo")
    assert dist["ranks"]["steps"] == [6, 5] and dist["ranks"]["forwards"] == 6
    assert dist["gatherings"] == dist["collectives"] >= 2


@pytest.mark.parametrize(
    ("bugs", "expected"),
    [
        (
            "rank-branch,dropped-output",
            {"block.weight": "rank-dependent", "aux.weight": "not part of the loss"},
        ),
        ("unused,detached", {"aux.weight": "never ran", "block.weight": ".detach()"}),
        ("reentrant", {"block.bias": "twice"}),
    ],
)
def test_ddp_reduction_error_is_named_and_explained(request, tmp_path, bugs, expected):
    if bugs in SHARED_REDUCTIONS:
        proc, doc = request.getfixturevalue("shared")[1][bugs]
    else:
        proc, doc = watch_json(tmp_path, DDP, "--bug", bugs)
    assert proc.returncode != 0
    assert doc is not None, proc.stderr[-3000:]  # torchrun never stops rank 0 first
    assert doc["summary"]["status"] == "crashed"
    found = by_rule(doc, "GS504")
    for subject, words in expected.items():
        assert subject in found and words in found[subject]["message"], found.keys()
    # one name per parameter: watch's own rules do not add DDP's `module.` prefix
    assert not any(f["subject"].startswith("module.") for f in doc["findings"])


def line_of(path, text):
    """The 1-based number of the line of `path` that holds `text`."""
    with open(path) as f:
        return next(i for i, line in enumerate(f, 1) if text in line)


def test_a_rank_that_dies_alone_has_its_findings_in_rank_0s_report(shared):
    """Only rank 0 runs cls_head: rank 1's DDP raises the reduction error, rank 0 waits in
    an all-reduce until rank 1 is gone and has nothing to explain itself. One report."""
    proc, doc = shared[1]["crash_alone"]
    # rank 0's code (the launch's: its script crashed); rank 1 leaves its to rank 0
    assert proc.codes == [2, 0], proc.stderr[-3000:]
    assert doc is not None, proc.stderr[-3000:]
    summary = doc["summary"]
    assert summary["status"] == "crashed" and summary["verdict"] == "error"
    assert "Connection closed by peer" in summary["error"]  # rank 0's own view
    found = by_rule(doc, "GS504")
    assert set(found) == {"cls_head.weight", "cls_head.bias"}
    for f in found.values():
        assert f["message"].startswith("no gradient on rank 1, used on others")
        assert f["evidence"][:2] == ["seen on rank 1", "its module ran on rank 0"]
    died = [n for n in summary["notes"] if n.startswith("rank 1 died: ")]
    forward = line_of(CRASH, "loss = model(")
    assert len(died) == 1
    assert f"crash_rank_branch.py:{forward}: the script raised RuntimeError: " in died[0]
    assert "Expected to have finished reduction" in died[0]
    # stderr: each rank names its own error, with file:line
    assert "gradscope: error: rank 1: " in proc.stderr
    assert "gradscope: error: rank 0: " in proc.stderr


def test_a_rank_that_dies_after_rank_0s_last_step_makes_the_run_crashed(shared):
    """Rank 0's script ends normally, rank 1's raises: not a clean run, and no time-out."""
    proc, doc = shared[1]["crash_late"]
    assert proc.codes == [2, 0], proc.stderr[-3000:]
    assert doc is not None, proc.stderr[-3000:]
    summary = doc["summary"]
    assert summary["status"] == "crashed" and summary["steps"] == 4
    assert summary["error"].startswith("the script died on rank 1: ")
    line = line_of(CRASH, "raise ValueError")
    assert summary["error"].endswith(
        f"crash_rank_branch.py:{line}: the script raised ValueError: rank 1 fails after its "
        "last step"
    )
    assert summary["where"] is None and summary["traceback"] is None  # not rank 0's
    assert any(n.startswith("rank 1 died: ") for n in summary["notes"])
    assert "gradscope: error: rank 0: the script died on rank 1: " in proc.stderr


def test_ddp_noise_scale_small_batch_is_rank_0s_own_micro_batches(shared):
    """Two ranks with different data, 2 micro-batches each (no_sync): the step's small
    batch is rank 0's own micro gradient, before DDP averages; the big one the averaged
    gradient of 2 x 2 micro-batches."""
    tmp, runs = shared
    seen_path = tmp / "seen.json"
    proc, doc = runs["noise"]
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    seen = json.loads(seen_path.read_text())
    steps = doc["steps"]
    assert len(steps) == len(seen) == 12
    assert steps[0]["micro_batches"] == 0  # the hooks go on at the first step
    for r, s in zip(steps[1:], seen[1:], strict=True):
        assert r["micro_batches"] == 4 and r["batch_samples"] == 8
        assert r["micro_sq"] == pytest.approx(s["micro_sq"], rel=1e-5)
        assert r["grad_norm"] ** 2 == pytest.approx(s["grad_sq"], rel=1e-5)
        assert s["apart"] > 0.1 * s["local_sq"]  # the ranks' gradients differ
    (summary,) = doc["summary"]["noise_scale"]
    assert summary["micro_batches"] == 4 and summary["batch"] == 32
    assert summary["steps"] == 11 and summary["critical_batch"] is not None
    assert len(doc["noise_scale"]["series"]) == 11


def inspect_reference() -> dict[str, tuple[float, float, float]]:
    """grad norm, max |grad| and weight norm per parameter for fsdp_train.py's first step,
    on the unsharded model and the whole batch of both ranks."""
    import torch
    from torch import nn

    from gradscope.examples.fsdp_train import build

    model = build()
    gen = torch.Generator().manual_seed(7)  # fsdp_train.py's data, both ranks' shards
    x, y = torch.randn(8, 8, generator=gen), torch.randn(8, 1, generator=gen)
    nn.functional.mse_loss(model(x), y).backward()
    return {
        n: (p.grad.norm().item(), p.grad.abs().max().item(), p.detach().norm().item())
        for n, p in model.named_parameters()
    }


def test_fsdp2_inspect_reports_the_whole_tensors_once(shared):
    """FSDP2 puts the sharded parameters back during the backward, with the gradients on
    them: `gradscope inspect --script` gives the norms of the whole tensors, made from
    every rank's shard, equal to an unsharded copy of the model fed the whole batch."""
    proc, doc = shared[1]["inspect"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "internal error" not in proc.stderr
    assert doc is not None, proc.stderr[-3000:]
    got = {p["name"]: p for p in doc["parameters"]}
    want = inspect_reference()
    assert set(got) == set(want)
    for name, (norm, biggest, weight) in want.items():
        assert math.isclose(got[name]["grad_norm"], norm, rel_tol=1e-5), name
        assert math.isclose(got[name]["grad_max"], biggest, rel_tol=1e-5), name
        assert math.isclose(got[name]["weight_norm"], weight, rel_tol=1e-5), name
    assert doc["findings"] == []
