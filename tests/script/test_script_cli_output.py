"""A training script's prints never reach stdout when the report goes there (script mode
included): `gradscope inspect train.py --format json | jq` must parse."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

CHATTY = """
import os, sys
import torch
from torch import nn

print("loading data")                      # Python's sys.stdout
os.write(1, b"from file descriptor 1\\n")    # what an extension's printf does
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    print(f"step {step} loss {loss.item():.3f}")
    try:
        loss.backward()
        opt.step()
    except BaseException as exc:
        print("caught:", exc)
        sys.stdout.flush()
"""


@pytest.mark.slow
@pytest.mark.parametrize("explicit", [True, False])
def test_script_prints_go_to_stderr_and_stdout_is_the_json(tmp_path, explicit):
    (tmp_path / "chatty.py").write_text(CHATTY)
    command = [sys.executable, "-m", "gradscope", "inspect", "chatty.py", "--format", "json"]
    proc = subprocess.run(
        command + (["--script"] if explicit else []),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)  # nothing but the report
    assert doc["target"] == "script chatty.py"
    assert "the script caught gradscope's stop" in doc["summary"]["loss_source"]
    for line in ("loading data", "from file descriptor 1", "step 0 loss", "caught: gradscope"):
        assert line in proc.stderr
    assert "step 1 loss" not in proc.stderr  # it stopped at the first step
