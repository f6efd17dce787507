"""The Lightning callback's opt-in stop under DDP (torchrun, 2 CPU ranks, gloo), reduced
across the ranks as EarlyStopping's decision is: an error only rank 1 sees stops both
ranks at the same step, and the report says stopped. One launch checks it all."""

from __future__ import annotations

import json
import os
import sys

import pytest

pytest.importorskip("lightning")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "distributed"))  # torchrun's teardown abort

import torchrun_launch  # noqa: E402

pytestmark = pytest.mark.slow
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]


def test_one_ranks_error_stops_every_rank_at_the_same_step(tmp_path):
    script = os.path.join(HERE, "scripts", "lightning_ddp_stop.py")
    proc = torchrun_launch.run([*TORCHRUN, script, str(tmp_path)], timeout=240, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]  # a rank stopped alone: a timeout
    rank0, rank1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert rank0["said"] == [] and "GS401" in rank1["said"]  # only rank 1 judged it
    assert rank0["step"] == rank1["step"] < 40  # stopped, both at the same step
    assert rank0["step"] == 8  # the NaN came at step 6, read back and reduced at step 8
    assert rank0["status"] == rank1["status"] == "stopped"
    doc = json.loads((tmp_path / "report.json").read_text())
    assert doc["summary"]["status"] == "stopped"
    assert doc["summary"]["steps"] == rank0["step"]
    assert "GS401" in {f["rule"] for f in doc["findings"]}
    assert "stopping the run on another rank's error" in proc.stdout + proc.stderr
