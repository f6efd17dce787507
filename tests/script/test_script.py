"""--script: a training script runs until its first backward, which gradscope measures."""

from __future__ import annotations

import json
import textwrap

import pytest
import torch

import gradscope
from gradscope.cli import app
from gradscope.errors import TargetError, UserCodeError

TRAIN = """
import argparse, sys
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--hidden", type=int, default=8)
args = parser.parse_args()

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, args.hidden)
        self.head = nn.Linear(args.hidden, 1)
        self.unused = nn.Linear(4, 4)
    def forward(self, x):
        return self.head(torch.relu(self.body(x)))

model = Net()
criterion = nn.MSELoss()          # a module too, but without parameters
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(1000):
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    try:
        loss = criterion(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    except Exception:             # scripts swallow errors; gradscope's stop gets through
        pass
    open("steps.log", "a").write(f"{step}\\n")
"""


@pytest.fixture
def train(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(TRAIN)
    return tmp_path


def test_script_stops_at_first_backward_and_reports_that_step(train):
    backward = torch.Tensor.backward
    report = gradscope.inspect_script("train.py", ["--hidden", "6"])
    assert torch.Tensor.backward is backward  # patch removed
    assert not (train / "steps.log").exists()  # stopped before the first step finished
    names = {p.name: p for p in report.stats.params}
    assert names["body.weight"].shape == (6, 4)
    assert names["body.weight"].has_grad and names["head.bias"].has_grad
    assert {f.subject for f in report.findings if f.slug == "none-grad"} == {
        "unused.weight",
        "unused.bias",
    }
    assert all("never ran" in f.message for f in report.findings)
    assert report.stats.loss_source == "the first backward() of train.py (train.py:27)"
    assert report.stats.saved_bytes > 0


def test_several_models_are_inspected_together(train):
    (train / "gan.py").write_text(
        textwrap.dedent("""
        import torch
        from torch import nn
        G, D = nn.Linear(2, 3), nn.Sequential(nn.Linear(3, 1))
        fake = G(torch.randn(4, 2))
        D(fake).mean().backward()
        """)
    )
    report = gradscope.inspect_script("gan.py")
    assert [p.name for p in report.stats.params] == [
        "Linear.weight",
        "Linear.bias",
        "Sequential.0.weight",
        "Sequential.0.bias",
    ]
    assert report.findings == []


def test_torch_autograd_backward_is_caught_too(train):
    (train / "ab.py").write_text(
        "import torch\nm = torch.nn.Linear(2, 1)\n"
        "torch.autograd.backward(m(torch.ones(1, 2)).sum())\n"
    )
    assert len(gradscope.inspect_script("ab.py").stats.params) == 2


@pytest.mark.parametrize(
    "body, error, message",
    [
        ("import torch\nprint('no training here')\n", TargetError, "without calling backward()"),
        ("import sys\nsys.exit(3)\n", TargetError, "exited (code 3) before calling backward()"),
        ("x = 1 / 0\n", UserCodeError, "s.py:1: running s.py raised ZeroDivisionError"),
        (
            "import torch\n(torch.ones(2, requires_grad=True) * 2).sum().backward()\n",
            TargetError,
            "before any nn.Module with trainable parameters ran",
        ),
        (  # a differentiable simulation: Adam over a physical field held by no module
            "import torch\nk = torch.nn.Parameter(torch.zeros(8))\nopt = torch.optim.Adam([k])\n"
            "u = torch.rand(8)\nfor _ in range(5):\n    u = u + 0.1 * k.exp() * u.roll(1)\n"
            "u.sum().backward()\n",
            TargetError,
            "no nn.Module ran: the backward trains tensors no module holds, a simulation's "
            "parameters or an input; inspect measures a model's parameters, `gradscope watch`",
        ),
        (  # an adversarial example / deep dream: Adam over the image, the network frozen
            "import torch\nnet = torch.nn.Linear(4, 2).requires_grad_(False)\n"
            "img = torch.rand(1, 4, requires_grad=True)\nopt = torch.optim.Adam([img])\n"
            "net(img).sum().backward()\n",
            TargetError,
            "the modules that ran are all frozen: the backward trains a plain tensor",
        ),
    ],
)
def test_scripts_that_cannot_be_inspected(train, body, error, message):
    (train / "s.py").write_text(body)
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        gradscope.inspect_script("s.py")


def test_cli_script_mode(runner, train):
    result = runner.invoke(
        app, ["inspect", "train.py", "--script", "--format", "json", "--", "--hidden", "5"]
    )
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    assert doc["target"] == "script train.py"
    assert [p["shape"] for p in doc["parameters"]][:1] == [[5, 4]]
    # a file without gradscope_target is a script: --script is implied, and said
    result = runner.invoke(app, ["inspect", "train.py", "--format", "json", "--", "--hidden", "5"])
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout)["target"] == "script train.py"
    assert "train.py defines no gradscope_target(): inspecting it as a training" in result.stderr
    (train / "target.py").write_text("def gradscope_target():\n    pass\n")
    result = runner.invoke(app, ["inspect", "target.py", "--", "--hidden", "5"])
    assert result.exit_code == 2 and "after -- are for a --script TARGET" in result.stderr
