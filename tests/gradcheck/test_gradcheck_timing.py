"""The time a target reports is its own: torch's one-off lazy imports are not billed to it,
and a process pays for forward mode's imports only when a check uses forward mode."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

BACKWARD_ONLY = """
import sys
import torch
from gradscope.examples.functions import CustomReLU
from gradscope.gradcheck import check

class Linear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.layer(x)

assert check(CustomReLU, second_order=True).passed and check(Linear).passed
print("torch._dynamo" in sys.modules)
"""


def _gradcheck_json(*specs: str) -> list[dict]:
    done = subprocess.run(
        [sys.executable, "-m", "gradscope", "gradcheck", "-f", "json", *specs],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["targets"]


@pytest.mark.slow
def test_first_target_time_excludes_torchs_first_call_imports():
    relu, jvp = "gradscope.examples.functions:CustomReLU", "gradscope.examples.functions:SinWithJvp"
    targets = _gradcheck_json(relu, relu, jvp, jvp)
    first, second = (t["checks"][0]["duration_s"] for t in targets[:2])
    # 4x4 CustomReLU: tens of ms at most; without the warm-up the first took ~1 s (sympy)
    assert first < 0.3 and first < 10 * second + 0.1, (first, second)
    # the first forward-ad check does not pay for the first dual tensor (torch._dynamo)
    first, second = (
        next(c["duration_s"] for c in t["checks"] if c["name"] == "forward-ad") for t in targets[2:]
    )
    assert first < 0.3 and first < 10 * second + 0.1, (first, second)


@pytest.mark.slow
def test_a_backward_only_check_never_imports_forward_modes_machinery():
    # the first dual tensor imports torch._dynamo: ~1.3 s of CPU a backward check never uses
    done = subprocess.run(
        [sys.executable, "-c", BACKWARD_ONLY], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
