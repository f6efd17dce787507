"""`gradscope inspect --script` under torchrun on an FSDP2 run (slow: one 2-rank launch).

FSDP2 puts the sharded parameters back during the backward, with the gradients on them:
the report must give the norms of the whole tensors, made from every rank's shard, and
they must equal an unsharded copy of the model fed the whole global batch.
"""

from __future__ import annotations

import json
import math
import os
import sys

import pytest
import torch
import torchrun_launch
from torch import nn

from gradscope.examples.fsdp_train import build

pytestmark = pytest.mark.slow
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FSDP = os.path.join(ROOT, "gradscope", "examples", "fsdp_train.py")
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]


def reference() -> dict[str, tuple[float, float, float]]:
    """grad norm, max |grad| and weight norm per parameter for fsdp_train.py's first step,
    on the unsharded model and the whole batch of both ranks."""
    model = build()
    gen = torch.Generator().manual_seed(7)  # fsdp_train.py's data, both ranks' shards
    x, y = torch.randn(8, 8, generator=gen), torch.randn(8, 1, generator=gen)
    nn.functional.mse_loss(model(x), y).backward()
    return {
        n: (p.grad.norm().item(), p.grad.abs().max().item(), p.detach().norm().item())
        for n, p in model.named_parameters()
    }


def test_fsdp2_inspect_reports_the_whole_tensors_once(tmp_path):
    out = tmp_path / "report.json"
    proc = torchrun_launch.run(
        [*TORCHRUN, "-m", "gradscope", "inspect", FSDP, "--script", "-f", "json", "-o", str(out)],
        timeout=180,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "internal error" not in proc.stderr
    doc = json.loads(out.read_text())
    got = {p["name"]: p for p in doc["parameters"]}
    want = reference()
    assert set(got) == set(want)
    for name, (norm, biggest, weight) in want.items():
        assert math.isclose(got[name]["grad_norm"], norm, rel_tol=1e-5), name
        assert math.isclose(got[name]["grad_max"], biggest, rel_tol=1e-5), name
        assert math.isclose(got[name]["weight_norm"], weight, rel_tol=1e-5), name
    assert doc["findings"] == []
