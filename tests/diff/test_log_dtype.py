"""`watch --log` records the parameters' dtype, and the diff of two logs judges by it."""

from __future__ import annotations

import json

from gradscope.diff.runs import diff_logs
from gradscope.watcher import watch_script

SCRIPT = """
import sys, torch
from torch import nn
torch.manual_seed(0)
dtype = getattr(torch, sys.argv[1])
model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1)).to(dtype)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x, y = torch.randn(64, 8, dtype=dtype), torch.randn(64, 1, dtype=dtype)
for _ in range(30):
    opt.zero_grad()
    loss = (model(x) - y).pow(2).mean()
    loss.backward()
    opt.step()
"""


def _log(tmp_path, dtype: str) -> str:
    script, log = tmp_path / "train.py", tmp_path / f"{dtype}.jsonl"
    script.write_text(SCRIPT)
    report = watch_script(str(script), [dtype], log=str(log))
    assert report.run.status == "completed" and len(report.run.steps) == 30
    return str(log)


def test_the_log_header_names_the_dtype_and_the_diff_uses_its_tolerance(tmp_path):
    double, single = _log(tmp_path, "float64"), _log(tmp_path, "float32")
    with open(double) as f:
        assert json.loads(f.readline())["dtype"] == "float64"
    same = diff_logs(double, double)
    assert same.tolerance.rtol == 1e-6 and "assumed" not in same.tolerance.source
    # float64 against float32: the looser of the two dtypes decides
    mixed = diff_logs(double, single)
    assert mixed.tolerance.rtol == 1e-4
