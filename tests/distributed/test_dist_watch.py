"""`gradscope watch` under torchrun (slow: each launch is two processes; one per case)."""

from __future__ import annotations

import json
import os
import sys

import pytest
import torchrun_launch

pytestmark = pytest.mark.slow
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DDP = os.path.join(ROOT, "gradscope", "examples", "ddp_train.py")
FSDP = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "scripts", "fsdp_reference_train.py"
)
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]


def run(cmd, **kw):
    return torchrun_launch.run(cmd, timeout=180, cwd=ROOT, **kw)


def test_healthy_ddp_watch_reports_once_from_rank_0(tmp_path):
    log = tmp_path / "steps.jsonl"
    # `--` before gradscope: torchrun's own parser would take --log for its --log-dir
    proc = run(
        [*TORCHRUN, "-m", "--", "gradscope", "watch", DDP, "--log", str(log), "--", "--bug", "none"]
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("gradscope watch · script") == 1  # rank 1 prints no report
    assert "no findings" in proc.stdout
    assert "DDP on 2 ranks (gloo)" in proc.stdout
    assert "6 optimizer steps" in proc.stdout
    lines = log.read_text().splitlines()  # one writer: a header and one line per step
    assert len(lines) == 7 and json.loads(lines[0])["params"]
    assert "rank 1 done" in proc.stderr  # the script's own prints go to stderr
    assert "Traceback" not in proc.stderr


def test_fsdp2_watch_norms_are_the_unsharded_ones(tmp_path):
    out, ref = tmp_path / "report.json", tmp_path / "reference.json"
    proc = run(
        [
            *TORCHRUN,
            "-m",
            "gradscope",
            "watch",
            FSDP,
            "-f",
            "json",
            "-o",
            str(out),
            "--",
            "--reference",
            str(ref),
            "--clip",
            "0.5",
        ]
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc, want = json.loads(out.read_text()), json.loads(ref.read_text())
    assert doc["findings"] == []
    assert "FSDP2 on 2 ranks (gloo)" in doc["summary"]["notes"][0]
    names = [p["name"] for p in doc["params"]]
    assert len(doc["steps"]) == len(want) == 4
    for step, reference in zip(doc["steps"], want, strict=True):
        total = reference.pop("total")  # clip_grad_norm_'s global total on the FSDP2 model
        got = dict(zip(names, step["param_norms"], strict=True))
        assert got.keys() == reference.keys()
        for name, value in reference.items():  # before clipping, unsharded reference
            assert abs(got[name] - value) <= 1e-6 * value, (name, got[name], value)
        summed = sum(v * v for v in reference.values()) ** 0.5
        assert abs(total - summed) <= 1e-6 * summed
        assert abs(step["grad_norm"] - summed) <= 1e-6 * summed
        coefficient = min(1.0, 0.5 / (summed + 1e-6))  # the global clip coefficient
        assert abs(step["clipped_norm"] - summed * coefficient) <= 1e-6 * step["clipped_norm"]


def test_ddp_unused_module_is_named_when_the_script_dies(tmp_path):
    out = tmp_path / "report.json"
    proc = run(
        [
            *TORCHRUN,
            "-m",
            "gradscope",
            "watch",
            DDP,
            "-f",
            "json",
            "-o",
            str(out),
            "--",
            "--bug",
            "unused",
        ]
    )
    assert proc.returncode != 0
    if out.exists():
        doc = json.loads(out.read_text())
        assert doc["summary"]["status"] == "crashed"
        found = {f["subject"]: f for f in doc["findings"] if f["rule"] == "GS504"}
        assert "aux.weight" in found and "never ran" in found["aux.weight"]["message"]
        assert "freeze" in found["aux.weight"]["advice"]
        # one name per parameter: watch's own rules do not add DDP's `module.` prefix
        assert not any(f["subject"].startswith("module.") for f in doc["findings"])
    else:  # torchrun stopped rank 0 first: rank 1's explanation is on stderr
        assert "GS504 aux.weight" in proc.stderr and "never ran" in proc.stderr


def test_nproc_per_node_relaunches_and_returns_rank_0_exit_code(tmp_path):
    out = tmp_path / "report.json"
    proc = run(
        [
            sys.executable,
            "-m",
            "gradscope",
            "watch",
            DDP,
            "--nproc-per-node",
            "2",
            "-f",
            "json",
            "-o",
            str(out),
            "--",
            "--bug",
            "perturb",
        ]
    )
    assert proc.returncode == 1, proc.stderr[-3000:]  # findings, not torchrun's own code
    doc = json.loads(out.read_text())
    assert ("GS505", "block.weight") in {(f["rule"], f["subject"]) for f in doc["findings"]}
