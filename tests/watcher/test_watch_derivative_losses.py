"""A loss on a derivative of the model's output (a Hamiltonian network's time derivatives,
a force field's forces, by autograd.grad with create_graph) reaches no output-layer bias:
that bias adds a constant, whose derivative is 0. Its None gradient beside a weight that
learned is information, nothing cut (GS413 in watch, GS101 in inspect, said "the graph is
cut after it"). A head the loss never reads, under the same loss, and a bias added
detached to a first-order loss, are still named."""

from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F

import gradscope
from gradscope.findings import Severity
from tests.watcher.watch_scripts import DOMAINS, domain_watched

SCRIPT = "derivative_losses.py"


def _loud(findings) -> list:
    return [f for f in findings if f.severity >= Severity.WARNING]


@pytest.fixture(scope="module")
def hnn():
    return domain_watched(SCRIPT, "hnn", "20")


def test_a_hamiltonians_output_bias_is_information_in_watch(hnn):
    assert _loud(hnn.findings) == [], hnn.findings
    (found,) = [f for f in hnn.findings if f.rule == "GS413"]
    assert found.subject == "net.2.bias" and found.severity == Severity.INFO
    assert "create_graph" in found.message and "net.2.weight" in found.message


def test_a_force_fields_energy_and_forces_are_silent():
    report = domain_watched(SCRIPT, "forces", "15")
    assert _loud(report.findings) == [], report.findings
    assert not [f for f in report.findings if f.rule == "GS413"], report.findings


def test_a_head_the_derivative_loss_never_reads_is_still_named():
    found = [f for f in _loud(domain_watched(SCRIPT, "hnn-aux", "10").findings)]
    assert {f.subject for f in found if f.rule == "GS413"} == {"aux.weight", "aux.bias"}


def test_a_bias_added_detached_to_a_first_order_loss_is_still_named():
    found = _loud(domain_watched(SCRIPT, "detached-bias", "10").findings)
    assert [(f.rule, f.subject) for f in found] == [("GS413", "pair.2.bias")]


@pytest.mark.parametrize("mode, severity", [("hnn", Severity.INFO), ("hnn-aux", None)])
def test_inspect_says_the_output_bias_is_read_through_the_derivative(mode, severity):
    report = gradscope.inspect_script(os.path.join(DOMAINS, SCRIPT), [mode, "1"])
    bias = [f for f in report.findings if f.subject == "net.2.bias"]
    if severity is None:  # the aux head, truly unused, still an error
        assert bias and bias[0].severity == Severity.INFO
        aux = {f.subject: f.severity for f in report.findings if f.subject.startswith("aux")}
        assert aux == {"aux.weight": Severity.ERROR, "aux.bias": Severity.ERROR}
    else:
        assert [f.severity for f in bias] == [severity]
        assert "create_graph" in bias[0].message
        assert _loud(report.findings) == [], report.findings


def test_inspect_finds_a_model_torch_func_runs_and_its_derivative_read_bias():
    """A Lagrangian network by functional_call under torch.func's jacfwd over grad, vmapped:
    the module holds its parameters wrapped while it runs, and inspect said its modules were
    all frozen (exit 2). Its first step's gradient is large where the learned Hessian's
    entry it divides by is near 0 (GS104, not judged here)."""
    report = gradscope.inspect_script(os.path.join(DOMAINS, SCRIPT), ["lnn", "1"])
    got = [p.name for p in report.stats.params if p.has_grad]
    assert got == ["0.weight", "0.bias", "2.weight", "2.bias", "4.weight"]
    none = [(f.subject, f.severity) for f in report.findings if f.rule == "GS101"]
    assert none == [("4.bias", Severity.INFO)], report.findings


@pytest.fixture(scope="module")
def forces_only():
    return domain_watched(SCRIPT, "forces-only", "8")


def test_a_force_matching_fit_reads_its_silu_derivative_and_its_shift(forces_only):
    """The loss on the forces alone: SiLU's and a Linear's derivative formulas record nodes
    named as a forward's, so the derivative is known by the nodes autograd.grad returned;
    the per-species shift only adds to the energy differentiated (GS413 said it never
    learns, a warning, and the output bias was told as a stack's last block)."""
    assert _loud(forces_only.findings) == [], forces_only.findings
    told = {f.subject: f.message for f in forces_only.findings if f.rule == "GS413"}
    assert set(told) == {"pair.2.bias", "shift"}, forces_only.findings
    assert "create_graph" in told["pair.2.bias"] and "pair.2.weight" in told["pair.2.bias"]
    assert "only adds to an output" in told["shift"]


def test_a_branch_fed_detached_distances_is_still_named_under_a_force_loss():
    """The environment network's energy depends on no position: no force reaches it, a cut
    (its values go through a Linear), not an offset of the energy."""
    found = _loud(domain_watched(SCRIPT, "detached-branch", "8").findings)
    subjects = {f.subject for f in found if f.rule == "GS413"}
    assert subjects == {"env.0.weight", "env.0.bias", "env.2.weight", "env.2.bias"}, found


@pytest.mark.parametrize("mode", ["forces-only", "detached-branch"])
def test_inspect_reads_a_force_matching_loss_through_its_derivative(mode):
    report = gradscope.inspect_script(os.path.join(DOMAINS, SCRIPT), [mode, "1"])
    told = {f.subject: f for f in report.findings if f.rule == "GS101"}
    assert told["pair.2.bias"].severity == Severity.INFO, report.findings
    assert "create_graph" in told["pair.2.bias"].message
    assert told["shift"].severity == Severity.INFO
    assert "only adds to an output" in told["shift"].message
    env = {s: f.severity for s, f in told.items() if s.startswith("env")}
    assert all(s == Severity.ERROR for s in env.values()) and len(env) == 4 * (
        mode != "forces-only"
    )


class _ForcesOf(torch.nn.Module):
    """A model whose forward returns forces, -dE/dx of a SiLU energy with a per-species shift."""

    def __init__(self):
        super().__init__()
        self.energy = torch.nn.Sequential(
            torch.nn.Linear(3, 16), torch.nn.SiLU(), torch.nn.Linear(16, 1)
        )
        self.shift = torch.nn.Parameter(torch.zeros(2))

    def forward(self, x):
        x = x.clone().requires_grad_(True)
        e = self.energy(x).sum() + self.shift[torch.arange(len(x)) % 2].sum()
        return -torch.autograd.grad(e, x, create_graph=True)[0]


def test_inspect_reads_the_derivative_a_models_forward_takes():
    torch.manual_seed(0)
    x = torch.randn(16, 3)
    report = gradscope.inspect(_ForcesOf(), x, loss_fn=lambda f: F.mse_loss(f, -x))
    told = {f.subject: f for f in report.findings if f.rule == "GS101"}
    assert {s: f.severity for s, f in told.items()} == {
        "energy.2.bias": Severity.INFO,
        "shift": Severity.INFO,
    }, report.findings
    assert torch.autograd.grad.__module__ == "torch.autograd"  # restored
