"""A force field's forces -dE/dpositions by torch.autograd.grad, when the derivative's input
is not in the energy's graph. torch's errors say what failed, not why: "One of the
differentiated Tensors does not require grad" (the positions were never set to require grad)
and "... appears to not have been used in the graph" (the energy does not depend on the
positions: e3nn's o3.Linear (e3nn/o3/_linear.py) asked for an irrep its input cannot reach,
such as a parity-odd energy 0o from 0e and 1o features, has no path and returns zeros).
The script's failure line names the cause and the fix."""

from __future__ import annotations

import pytest

from gradscope.findings import Severity
from gradscope.watcher import watch_script

FORCE_FIELD = """
import torch
torch.manual_seed(0)

class Potential(torch.nn.Module):
    def __init__(self, pathless):
        super().__init__()
        nn = torch.nn
        self.pair = nn.Sequential(nn.Linear(1, 8), nn.SiLU(), nn.Linear(8, 4))
        self.readout = torch.nn.Linear(4, 1)
        self.pathless = pathless
        self.shift = torch.nn.Parameter(torch.zeros(2))  # per species

    def forward(self, pos, species):
        d = (pos[:, :, None] - pos[:, None] + 1e-9).norm(dim=-1, keepdim=True)
        h = self.pair(d).sum(2)
        # e3nn's o3.Linear with no path to the output irreps: zeros of the output's shape
        e_atom = h.new_zeros(h.shape[:-1]) if self.pathless else self.readout(h).squeeze(-1)
        return (e_atom + self.shift[species]).sum(1)

MODE = "{mode}"
model = Potential(pathless=MODE == "pathless")
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
species = torch.tensor([0, 1, 0, 1])
for _ in range(3):
    pos = torch.randn(8, 4, 3)
    if MODE != "positions-without-grad":
        pos.requires_grad_(True)
    e = model(pos, species)
    f = -torch.autograd.grad(e.sum(), pos, create_graph=True)[0]
    loss = e.pow(2).mean() + 10 * f.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def _watched(tmp_path, mode: str):
    script = tmp_path / "force_field.py"
    script.write_text(FORCE_FIELD.replace("{mode}", mode))
    return watch_script(str(script), [])


def test_the_force_field_trains_without_a_finding(tmp_path):
    healthy = _watched(tmp_path, "healthy")
    assert not healthy.faults, healthy.internal_error()
    assert healthy.run.status == "completed" and len(healthy.run.steps) == 3
    assert [f for f in healthy.findings if f.severity >= Severity.WARNING] == []


@pytest.mark.parametrize(
    ("mode", "torch_says", "cause"),
    [
        (
            "positions-without-grad",
            "One of the differentiated Tensors does not require grad",
            "call .requires_grad_(True) on it before the forward",
        ),
        (
            "pathless",
            "appears to not have been used in the graph",
            "the output torch.autograd.grad differentiates does not depend on that input",
        ),
    ],
)
def test_the_failure_says_why_the_positions_are_not_in_the_graph(tmp_path, mode, torch_says, cause):
    broken = _watched(tmp_path, mode)
    assert not broken.faults, broken.internal_error()
    line = broken.failure() or ""
    assert torch_says in line and cause in line
    assert line.index(torch_says) < line.index(cause)  # torch's words first, then the cause
