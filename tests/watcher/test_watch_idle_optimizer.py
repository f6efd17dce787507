"""An optimizer whose zero_grad() runs and whose step() never does (GS411). A synthetic-
gradient module (DNI) trained on the true gradient by an optimizer whose step() the
script forgot was never looked at, its module apart from every stepped optimizer's: the
run was told only that the layer its zero-initialised output feeds got zero gradients.
And a block whose optimizer never got to step (the run stopped first, or died first: a
layer-wise loop without its .detach()) was said to be in no optimizer param group. The
look-alikes, the same module's optimizer stepped and the layer-wise loop detached, are
silent."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import gradscope
from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched


def _synthetic_gradients(stepped: bool):
    torch.manual_seed(0)
    layer, head = torch.nn.Linear(6, 8), torch.nn.Linear(8, 3)
    synthesizer = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8))
    opt_layer = torch.optim.Adam(layer.parameters(), lr=1e-3)
    opt_head = torch.optim.Adam(head.parameters(), lr=1e-3)
    opt_synth = torch.optim.Adam(synthesizer.parameters(), lr=1e-3)
    with gradscope.watch() as w:
        for _ in range(6):
            x, y = torch.randn(5, 6), torch.randint(0, 3, (5,))
            h = layer(x)
            synthetic = synthesizer(h.detach())
            opt_layer.zero_grad()
            h.backward(synthetic.detach())
            opt_layer.step()
            h_in = h.detach().requires_grad_()
            loss = F.cross_entropy(head(h_in), y)
            opt_head.zero_grad()
            loss.backward()
            opt_head.step()
            opt_synth.zero_grad()
            F.mse_loss(synthetic, h_in.grad).backward()
            if stepped:
                opt_synth.step()
    return w.report


def test_a_separate_modules_optimizer_that_never_steps_is_named():
    found = [f for f in _synthetic_gradients(stepped=False).findings if f.rule == "GS411"]
    errors = [f for f in found if f.severity.name == "ERROR"]
    assert errors and all(f.subject.startswith("Sequential") for f in errors)
    assert all("whose step() never did" in f.message for f in errors)


def test_the_same_optimizer_stepped_is_silent():
    assert "GS411" not in {f.rule for f in _synthetic_gradients(stepped=True).findings}


def test_a_block_whose_optimizer_never_stepped_is_not_said_to_be_in_no_optimizer():
    # the second block's phase begins after the steps the run got to (or the run
    # stopped first): its optimizer is zeroed and never steps
    torch.manual_seed(0)
    blocks = torch.nn.ModuleList([torch.nn.Linear(6, 8), torch.nn.Linear(8, 3)])
    opts = [torch.optim.SGD(b.parameters(), lr=0.1) for b in blocks]
    with gradscope.watch() as w:
        for step in range(4):
            h = blocks[0](torch.randn(5, 6))
            for opt in opts:
                opt.zero_grad()
            h.pow(2).mean().backward()
            opts[0].step()
            if step >= 10:
                blocks[1](h.detach()).pow(2).mean().backward()
                opts[1].step()
    found = [f for f in w.report.findings if f.rule == "GS411" and f.subject.startswith("1.")]
    assert found and all("in no optimizer param group" not in f.message for f in found)
    assert all("whose step() never did" in f.message for f in found)


def test_blocks_whose_optimizers_the_crash_came_before_are_not_said_to_be_in_none():
    # the second block's optimizer was zeroed when the script died, the third's not yet
    report = domain_watched("layer_wise.py", "attached")
    assert not report.faults, report.internal_error()
    assert report.run.status == "crashed"
    found = [f for f in report.findings if f.rule == "GS411"]
    assert {f.subject.split(".")[1] for f in found} == {"1", "2"}
    assert all("in no optimizer param group" not in f.message for f in found)
    assert any("had not stepped yet when the run ended" in f.message for f in found)


def test_the_layer_wise_loop_with_its_detach_is_silent():
    report = domain_watched("layer_wise.py", "healthy")
    assert not [f for f in report.findings if f.severity >= Severity.WARNING], report.findings


def _hyperparameters_left_unstepped(zeroed_each_step: bool):
    # gpytorch's natural-gradient recipe (examples/04_Variational_and_Approximate_GPs/
    # Natural_Gradient_Descent.ipynb): NGD steps the variational parameters and Adam the
    # kernel's hyperparameters, both zeroed at each step; here Adam's step() is left out.
    # The hyperparameter's gradient grows as the other optimizer moves the model, not
    # because it piles up: its zero_grad() resets it at every step
    torch.manual_seed(0)
    variational = torch.nn.Parameter(torch.tensor([0.1]))
    scale = torch.nn.Parameter(torch.tensor([1.0]))
    ngd_like = torch.optim.SGD([variational], lr=0.1)
    hyper = torch.optim.Adam([scale], lr=0.01)
    with gradscope.watch() as w:
        hyper.zero_grad()
        for _ in range(12):
            ngd_like.zero_grad()
            if zeroed_each_step:
                hyper.zero_grad()
            loss = (variational - 3.0).pow(2).sum() + 0.01 * (scale * variational).sum()
            loss.backward()
            ngd_like.step()
    return [f for f in w.report.findings if f.rule == "GS411"]


def test_a_gradient_its_idle_optimizer_resets_is_not_said_to_pile_up():
    found = _hyperparameters_left_unstepped(zeroed_each_step=True)
    assert found and all("whose step() never did" in f.message for f in found)
    assert not any("nothing resets" in e for f in found for e in f.evidence), found


def test_a_gradient_its_idle_optimizer_reset_once_still_piles_up():
    found = _hyperparameters_left_unstepped(zeroed_each_step=False)
    assert found and any("nothing resets" in e for f in found for e in f.evidence), found
