"""A force field's forces -dE/dpositions by torch.autograd.grad, when the derivative's input
is not in the energy's graph. torch's errors say what failed, not why: "One of the
differentiated Tensors does not require grad" (the positions were never set to require grad)
and "... appears to not have been used in the graph" (the energy does not depend on the
positions: e3nn's o3.Linear (e3nn/o3/_linear.py) asked for an irrep its input cannot reach,
such as a parity-odd energy 0o from 0e and 1o features, has no path and returns zeros).
A model that takes its own forces with create_graph=self.training, left in eval() by a
validation pass, frees the graph its loss goes back through. The script's failure line
names the cause and the fix."""

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


FORCES_IN_MODEL = """
import torch
torch.manual_seed(0)

class WithForces(torch.nn.Module):
    # NequIP's GradientOutput (nequip/nn/_grad_output.py): forces inside the model,
    # with create_graph=self.training
    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.energy = nn.Sequential(nn.Linear(3, 8), nn.SiLU(), nn.Linear(8, 1))

    def forward(self, pos):
        pos = pos.requires_grad_(True)
        e = self.energy(pos).sum()
        return e, -torch.autograd.grad(e, pos, create_graph=self.training)[0]

model = WithForces()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
POS = torch.randn(6, 3)
for step in range(4):
    e, f = model(POS.clone())
    loss = e.pow(2) + f.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step == 1:
        model.eval()  # validation
        model(torch.randn(6, 3))
        {after_validation}
"""


def _forces_in_model(tmp_path, after_validation: str):
    script = tmp_path / "forces_in_model.py"
    script.write_text(FORCES_IN_MODEL.replace("{after_validation}", after_validation))
    return watch_script(str(script), [])


def test_a_model_put_back_in_training_after_validation_trains(tmp_path):
    healthy = _forces_in_model(tmp_path, "model.train()")
    assert not healthy.faults, healthy.internal_error()
    assert healthy.run.status == "completed" and len(healthy.run.steps) == 4
    assert [f for f in healthy.findings if f.severity >= Severity.WARNING] == []


def test_forces_freed_by_a_model_left_in_eval_name_the_missing_train(tmp_path):
    left = _forces_in_model(tmp_path, "pass")
    assert not left.faults, left.internal_error()
    line = left.failure() or ""
    assert "backward through the graph a second time" in line
    assert "in a module in eval mode" in line and "call .train() on the model" in line
