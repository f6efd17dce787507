"""Copies trained against each other: at an optimizer's first step with gradients, the
parameters it holds that are exact copies of one another (a reference model deep-copied
from the policy, a model loaded twice) and whether their gradients point opposite ways.

A loss on the difference between a model and its copy (DPO's, IPO's or KTO's log-ratio to
a reference, a KL penalty to a reference policy) gives the two sides exactly opposite
gradients while their weights are equal; healthy code keeps the copy out of the optimizer
and its forward under no_grad, so it has none. Read once per optimizer, at its first step:
one fingerprint per tensor (norm and sum), then equality and a cosine only for the tensors
whose fingerprints match. Distributed tensors (DTensor) are left alone: their comparisons
would be collectives.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from gradscope.steps.state_facts import MirroredPair

TRIES = 3
"""Steps begun without gradients in place after which an optimizer is no longer read: one
stepped with a closure (LBFGS, Lightning) computes them inside the step, and a scan of its
parameters at every step would cost the run."""

MIN_NUMEL = 16
"""Smaller tensors (a scalar gate, a temperature) are equal and opposite by chance."""


@dataclass
class Mirrored:
    read: set[int] = field(default_factory=set)
    """id(optimizer) of those already read (or given up on)."""
    tries: dict[int, int] = field(default_factory=dict)
    """id(optimizer) → its steps begun so far without gradients to read."""
    pairs: list[tuple[Any, Any, float]] = field(default_factory=list)
    """(tensor, its copy, their gradients' cosine): held until the run's facts are read
    (the optimizer holds them anyway), as a tensor new to the watch is given its position
    only when the step's statistics are taken."""

    def before_step(self, optimizer: Any) -> None:
        """The optimizer's step starts with its gradients in place: at its first, pair its
        copies."""
        if id(optimizer) in self.read:
            return
        self.tries[id(optimizer)] = self.tries.get(id(optimizer), 0) + 1
        if self.tries[id(optimizer)] >= TRIES:
            self.read.add(id(optimizer))  # a closure's steps: no gradient before the step
        params = [p for g in optimizer.param_groups for p in g["params"]]
        with_grad = [
            p
            for p in params
            if _plain(p) and p.numel() >= MIN_NUMEL and p.grad is not None and not p.grad.is_sparse
        ]
        if not with_grad:
            return  # a closure's step: its gradients come later; read at the next
        self.read.add(id(optimizer))
        with torch.no_grad():
            self.pairs += [(a, b, _cosine(a, b)) for a, b in _copies(with_grad)]

    def facts(self, index: dict[int, int]) -> tuple[MirroredPair, ...]:
        """The pairs, by the tensors' positions among the tracked parameters."""
        return tuple(
            MirroredPair(index[id(a)], index[id(b)], cosine)
            for a, b, cosine in self.pairs
            if id(a) in index and id(b) in index
        )


def _plain(p: Any) -> bool:
    """A real floating tensor of its own (no DTensor, no meta or complex tensor)."""
    return type(p.data) is torch.Tensor and p.device.type != "meta" and p.is_floating_point()


def _copies(params: list[Any]) -> list[tuple[Any, Any]]:
    """Pairs of distinct tensors with the same shape and values, not constant (a LayerNorm's
    ones, zero biases and LoRA's zero B matrices are equal without being copies)."""
    by_print: dict[tuple[Any, ...], list[Any]] = {}
    for device in {p.device for p in params}:
        here = [p for p in params if p.device == device]
        prints = torch.stack([torch.stack([p.float().norm(), p.float().sum()]) for p in here])
        for p, (norm, total) in zip(here, prints.tolist(), strict=True):
            key = (tuple(p.shape), p.dtype, device, norm, total)
            by_print.setdefault(key, []).append(p)
    out = []
    for group in by_print.values():
        for k, a in enumerate(group):
            twin = next((b for b in group[k + 1 :] if torch.equal(a, b)), None)
            if twin is not None and bool(a.max() != a.min()):
                out.append((a, twin))
    return out


def _cosine(a: Any, b: Any) -> float:
    ga, gb = a.grad.float(), b.grad.float()
    norms = float(ga.norm() * gb.norm())
    return float((ga * gb).sum()) / norms if norms > 0 else 0.0
