"""Gradients rewritten with the values the previous step applied (GS473): between two of an
optimizer's steps a backward ran and every `.grad` of it was written (a new tensor, or its
version moved), yet each holds the very values of the step before. A gradient copied back
from a flat buffer made once (a stale all-reduce buffer), or a cached gradient written over
the fresh one, leaves each step walking the same direction while the batches change.

At the steps same_batch reads (1-3, then pairs every 25, every 500 after step 101), each
gradient's fingerprint (hand_moved.fingerprints: its sampled bit patterns summed, on its
device) and identity are kept before the step and compared before the next one: no host
read until the run ends. A gradient no one wrote (the same tensor, the same version) is
GS472's or a parameter the backward did not reach, not this; nor one the backward itself
wrote with the same values (a loss linear in the weights), with nothing written after it;
nor gradients holding NaN or Inf: every NaN has one bit pattern, so NaN gradients look the
same at every step though they hold no value at all (GS401 and GS434 name them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from gradscope.watcher.hand_moved import fingerprints
from gradscope.watcher.same_batch import wanted

Kept = tuple[list[tuple[int, int]], list[tuple[list[int], Any]], int]
"""(id, version) of each gradient, their fingerprints per device, the backward count then."""


@dataclass
class SameGrads:
    kept: dict[int, Kept] = field(default_factory=dict)
    """id(optimizer) → what its gradients were before its last sampled step."""
    pending: list[tuple[int, list[Any]]] = field(default_factory=list)
    """(id(optimizer), per device a device bool: every fingerprint equal, and not all zero:
    zero gradients are GS405's) per interval in which a backward ran and every gradient was
    written."""
    same: dict[int, int] = field(default_factory=dict)
    """id(optimizer) → intervals whose gradients were all written with the same values."""
    compared: dict[int, int] = field(default_factory=dict)
    """id(optimizer) → intervals compared."""

    def before_step(self, optimizer: Any, step: int, backward_total: int, written: bool) -> None:
        """Optimizer step `step` starts: compare with what was kept, keep for the next.
        `written`: the script wrote a gradient after the last backward (a loss linear in
        the weights gives the same gradient by right, written by the backward itself)."""
        key = id(optimizer)
        if key not in self.kept and not wanted(step + 1):
            return  # most steps: nothing kept to compare, nothing to keep
        grads = [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        kept = self.kept.pop(key, None)
        if kept is not None and grads:
            self._compare(key, grads, kept, backward_total, written)
        if wanted(step + 1) and grads:
            marks = [(id(g), g._version) for g in grads]
            self.kept[key] = (marks, fingerprints(grads), backward_total)

    def _compare(
        self, key: int, grads: list[Any], kept: Kept, backward_total: int, written: bool
    ) -> None:
        marks, before, calls = kept
        now = [(id(g), g._version) for g in grads]
        if backward_total == calls or not written or len(now) != len(marks):
            return
        self.compared[key] = self.compared.get(key, 0) + 1
        if set(now) & set(marks):
            return  # a gradient no one wrote since
        prints = fingerprints(grads)
        if [at for at, _ in prints] != [at for at, _ in before] or not prints:
            return
        with torch.no_grad():
            equal = [
                (a == b).all() & (a != 0).any() & _finite([grads[i] for i in at])
                for (at, a), (_, b) in zip(prints, before, strict=True)
            ]
        self.pending.append((key, equal))

    def facts(self, optimizers: list[Any]) -> tuple[tuple[int, int, int], ...]:
        """(optimizer index, intervals with every gradient written with the same values,
        intervals compared), read back once."""
        for key, equal in self.pending:
            if all(bool(e) for e in equal):
                self.same[key] = self.same.get(key, 0) + 1
        self.pending = []
        index = {id(o): k for k, o in enumerate(optimizers)}
        return tuple(
            (index[key], self.same.get(key, 0), n)
            for key, n in self.compared.items()
            if key in index
        )


def _finite(grads: list[Any]) -> Any:
    """A device bool: every value of `grads` is finite (their float32 norms are)."""
    norms = torch._foreach_norm(grads, 2, dtype=torch.float32)
    return torch.stack(list(norms)).isfinite().all()
