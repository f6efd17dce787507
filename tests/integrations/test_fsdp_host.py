"""FSDP2 under torchrun (2 CPU ranks, gloo) through the host path: the norms the report
gives are the global ones, equal to an unsharded reference's; a plain `gradscope.watch()`
block's too (api.watch binds the distributed hooks under torchrun, as the CLI does)."""

from __future__ import annotations

import json
import math
import os
import sys

import pytest

pytest.importorskip("accelerate")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "distributed"))  # torchrun's teardown abort

import torchrun_launch  # noqa: E402

pytestmark = pytest.mark.slow
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]


def test_fsdp2_norms_are_global(tmp_path):
    _launched_norms_are_global(tmp_path)


def test_fsdp2_norms_are_global_in_a_plain_watch_block(tmp_path):
    _launched_norms_are_global(tmp_path, "block")


def _launched_norms_are_global(tmp_path, *how: str) -> None:
    report, ref = tmp_path / "report.json", tmp_path / "ref.json"
    script = os.path.join(HERE, "scripts", "fsdp_host_train.py")
    command = [*TORCHRUN, script, str(report), str(ref), *how]
    proc = torchrun_launch.run(command, timeout=180, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc, reference = json.loads(report.read_text()), json.loads(ref.read_text())
    names = [p["name"] for p in doc["params"]]
    assert len(doc["steps"]) == len(reference) == 6
    for step, want in zip(doc["steps"], reference, strict=True):
        assert math.isclose(step["grad_norm"], want["total"], rel_tol=1e-6)
        assert not math.isclose(step["grad_norm"], want["local"], rel_tol=1e-3)  # not a shard's
        for name, norm in zip(names, step["param_norms"], strict=True):
            assert math.isclose(norm, want["norms"][name], rel_tol=1e-6), (name, norm)
    assert [f for f in doc["findings"] if f["severity"] in ("error", "warning")] == []
