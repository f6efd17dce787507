"""torch imports dynamo at the first optimizer a script builds, and dynamo copies the
Tensor class's attributes then: a watch whose script built the first optimizer of the
process left its patched Tensor methods in that copy, and through their closures every
model and optimizer of the run alive after the watch (a search's trials, all of them). A
fresh interpreter is the only place where dynamo is not imported yet."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import gc, sys, weakref
import torch
from torch import nn
import gradscope
assert "torch._dynamo" not in sys.modules
trials = []
with gradscope.watch():
    for _ in range(3):
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(2):
            loss = model(torch.randn(8, 4)).log_softmax(0).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        trials.append(weakref.ref(opt))
        del model, opt
gc.collect()
from torch._dynamo.variables import tensor
copied = [
    k for k, f in tensor.all_tensor_attrs.items()
    if "gradscope" in (getattr(f, "__module__", None) or "")
]
print(sum(t() is not None for t in trials), copied)
"""


@pytest.mark.slow
def test_a_watch_that_builds_the_first_optimizer_leaves_nothing_alive_after_it():
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0 []"
