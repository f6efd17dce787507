"""A loss whose targets are broadcast over Monte Carlo samples, particles or ensemble members
(`y[:, None].expand(-1, 4)`) holds each target once: full-batch variational inference on 2000
points was said to train on "8000 targets", and told to look for more data than that. The
same batch is still named; a target that really holds its copies (`repeat`) counts them."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from gradscope.watcher.same_batch import SameBatch

POINTS, PARTICLES = 50, 4


def _facts(targets):
    """The same batch's facts after steps 1-3 whose loss reads `targets(y)` as its target."""
    torch.manual_seed(0)
    y = torch.bernoulli(torch.full((POINTS,), 0.5))
    logits = torch.randn(POINTS, PARTICLES, requires_grad=True)
    seen = SameBatch()
    for step in (1, 2, 3):
        seen.observe(F.binary_cross_entropy_with_logits(logits, targets(y)), step)
    (facts,) = seen.facts()
    return facts


def test_targets_broadcast_over_particles_are_counted_once():
    facts = _facts(lambda y: y[:, None].expand(-1, PARTICLES))
    assert facts.samples == POINTS
    assert facts.same == facts.compared == (2, 3)


def test_targets_copied_over_particles_count_every_copy():
    facts = _facts(lambda y: y[:, None].repeat(1, PARTICLES))
    assert facts.samples == POINTS * PARTICLES
    assert facts.same == facts.compared == (2, 3)
