"""A force field whose training takes the forces -dE/dx without create_graph (GS467): the
force term of its loss is computed outside the graph, a constant, and only the energy term
trains. The same forces taken with create_graph (the loss summed on a zero tensor, its
weights' gradient read for a log), or only logged beside an energy-only loss, or taken in an
evaluation under torch.enable_grad(), are not this; nor is a derivative with respect to
latents that feeds their next iterate (IODINE's refinement), whose losses are summed on a
Python 0, while a term on the derivative of such latents is."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import gradscope


def _force_field(mode: str):
    torch.manual_seed(0)
    energy = nn.Sequential(nn.Linear(3, 16), nn.SiLU(), nn.Linear(16, 1))
    opt = torch.optim.Adam(energy.parameters(), lr=1e-3)
    with gradscope.watch() as w:
        for _ in range(4):
            pos = torch.randn(8, 3, requires_grad=True)
            e = energy(pos).squeeze(-1)
            graph = mode == "create_graph"
            f = -torch.autograd.grad(e.sum(), pos, create_graph=graph, retain_graph=True)[0]
            loss = F.mse_loss(e, (pos**2).sum(-1).detach())
            if mode == "create_graph":  # summed onto a zero tensor
                loss = torch.zeros(()) + loss
            if mode != "logged":
                loss = loss + 10 * F.mse_loss(f, -2 * pos.detach())
            if mode == "create_graph":  # the weights' gradient read for a log
                torch.autograd.grad(loss, list(energy.parameters()), retain_graph=True)
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad(), torch.enable_grad():  # an evaluation's forces
            pos = torch.randn(8, 3, requires_grad=True)
            torch.autograd.grad(energy(pos).sum(), pos)
    return w.report.findings


def test_forces_taken_without_create_graph_in_training_are_named():
    (found,) = [f for f in _force_field("no_create_graph") if f.rule == "GS467"]
    assert found.steps[0] == 1 and "create_graph=True" in found.advice


@pytest.mark.parametrize("mode", ["create_graph", "logged"])
def test_forces_in_the_graph_or_only_logged_are_not_this(mode):
    assert "GS467" not in {f.rule for f in _force_field(mode)}


def _refinement(mode: str):
    """IODINE's iterative inference in small: latents refined from the derivative of the
    loss with respect to them (a plain autograd.grad, as the reference's detached inputs),
    the steps' losses summed on a Python 0; or a penalty on that derivative instead."""
    torch.manual_seed(0)
    decoder, refine = nn.Linear(4, 6), nn.Linear(8, 4)
    start = nn.Parameter(torch.zeros(1, 4))
    opt = torch.optim.Adam([*decoder.parameters(), *refine.parameters(), start], lr=1e-3)
    with gradscope.watch() as w:
        for _ in range(4):
            x, z, total = torch.randn(8, 6), start.expand(8, -1), 0.0
            for _ in range(2):
                err = ((decoder(z) - x) ** 2).sum(-1)
                total = total + err.mean()
                g = torch.autograd.grad(err.sum(), z, retain_graph=True)[0]
                if mode == "refine":
                    z = z + refine(torch.cat([z, g], -1))
                else:  # a term on the derivative, computed outside the graph
                    total = total + 0.1 * g.pow(2).mean()
            opt.zero_grad()
            total.backward()
            opt.step()
    return w.report.findings


def test_a_derivative_that_feeds_the_latents_next_iterate_is_not_a_term():
    assert "GS467" not in {f.rule for f in _refinement("refine")}


def test_a_term_on_the_derivative_of_computed_latents_is_still_named():
    assert "GS467" in {f.rule for f in _refinement("penalty")}


def test_positions_moved_by_forces_taken_without_create_graph_are_still_named():
    """A learned potential rolled out: positions stepped by its forces, which come back
    outside the graph, then a loss on the trajectory beside a force term: the positions
    are data moved by hand, not latents the weights computed."""
    torch.manual_seed(0)
    energy = nn.Sequential(nn.Linear(3, 16), nn.SiLU(), nn.Linear(16, 1))
    opt = torch.optim.Adam(energy.parameters(), lr=1e-3)
    with gradscope.watch() as w:
        for _ in range(4):
            pos = torch.randn(8, 3, requires_grad=True)
            moved, total = pos, 0.0
            for _ in range(2):
                e = energy(moved).sum()
                f = -torch.autograd.grad(e, moved, retain_graph=True)[0]
                total = total + 0.1 * e + F.mse_loss(f, -2 * moved.detach())
                moved = moved + 0.01 * f
            opt.zero_grad()
            (total + energy(moved).pow(2).mean()).backward()
            opt.step()
    assert "GS467" in {f.rule for f in w.report.findings}
