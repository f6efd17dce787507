"""Whether consecutive optimizer steps train on the same batch: the loss's targets.

torch's loss nodes keep their target (`_saved_target` of NllLossBackward0,
MseLossBackward0, ...). At the first backward of steps 1-3, and of a pair of steps every
SAMPLE_EVERY (LATER_EVERY after step 101), the target is found a few nodes below the
loss and compared on the device with the previous step's copy; the results are read
back once, when the run ends. A target that is one value throughout (a GAN's real
labels) or the positions 0..n-1 in some order (a contrastive loss's labels) is the same
in every batch by construction, and is not counted as the same batch (labels the
script lays out in blocks or in turns too: NCF's positives then negatives, a few-shot
episode's); class indices that are such positions at every read mark a contrastive
loss (BatchRepeats.positional).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from gradscope.autograd_walk import NodeWalk, Order, saved
from gradscope.steps.state_facts import BatchRepeats

SAMPLE_EVERY = 25
"""Pairs of steps 25k and 25k + 1 up to step 101, then 500k and 500k + 1."""
LATER_EVERY = 500
MAX_NODES = 16
"""Nodes visited below the loss at most: the loss node sits under a few reductions."""
TARGETS = (
    "NllLossBackward0",
    "NllLoss2DBackward0",
    "MseLossBackward0",
    "L1LossBackward0",
    "SmoothL1LossBackward0",
    "HuberLossBackward0",
    "BinaryCrossEntropyBackward0",
    "BinaryCrossEntropyWithLogitsBackward0",
)
MAX_COMPARED = 256


def wanted(step: int) -> bool:
    """Step `step`'s target is read: steps 1-3, then pairs of steps (25k, 25k + 1) up to
    step 101 and (500k, 500k + 1) after it (a comparison costs ~0.1 ms on a CPU)."""
    every = SAMPLE_EVERY if step <= 101 else LATER_EVERY
    return step <= 3 or step % every in (0, 1)


@dataclass
class SameBatch:
    previous: tuple[int, str, torch.Tensor] | None = None
    """(step, loss node, a copy of its target) of the last read step, while the next
    one is read too."""
    others: list[torch.Tensor] = field(default_factory=list)
    """Copies of the targets of the loss's other terms at that step (a TTS model's mel
    frames beside its stop-token labels)."""
    compared: list[tuple[int, torch.Tensor]] = field(default_factory=list)
    """(step, device bool: the same batch as the step before)."""
    positional: list[torch.Tensor] = field(default_factory=list)
    """Per class-index target read, a device bool: positions 0..n-1 or one index."""
    samples: int = 0
    node: str = ""

    def observe(self, loss: torch.Tensor, step: int) -> None:
        """The first backward of step `step` runs from `loss`."""
        if not wanted(step) or len(self.compared) >= MAX_COMPARED:
            return
        found = target_of(loss.grad_fn)
        previous, self.previous = self.previous, None
        if found is None:
            return
        node, target = found
        if target.numel() < 2 or target.is_complex() or target.dtype == torch.bool:
            return  # nothing a batch's labels are compared by (an empty batch, a mask)
        built = _by_construction(target)
        if _indices(target) and len(self.positional) < MAX_COMPARED:
            self.positional.append(built)
        others = [t for _, t in _targets(loss.grad_fn)[1:]]
        before, self.others = self.others, []
        if previous is not None and previous[0] == step - 1 and previous[1] == node:
            same = _same(previous[2], target, built | _laid_out(target))
            if same is not None:
                self.compared.append((step, same & _all_equal(before, others)))
                self.samples, self.node = _distinct(target), node
        if wanted(step + 1):
            self.previous = (step, node, target.detach().clone())
            self.others = [t.detach().clone() for t in others]

    def facts(self) -> list[BatchRepeats]:
        if not self.compared:
            return []
        device = self.compared[0][1].device
        read = [s.to(device) for _, s in self.compared] + [p.to(device) for p in self.positional]
        flags = torch.stack(read).tolist()  # one read back for both
        steps = tuple(step for step, _ in self.compared)
        same = tuple(step for step, flag in zip(steps, flags, strict=False) if flag)
        positional = len(flags) > len(steps) and all(flags[len(steps) :])
        self.compared, self.previous, self.positional = [], None, []
        return [BatchRepeats(0, steps, same, self.samples, self.node, positional)]


def target_of(node: Any) -> tuple[str, torch.Tensor] | None:
    """The first loss node's name and target among the nodes nearest the loss (every path
    walked: a node reached twice counts twice against the bound)."""
    roots = [] if node is None else [node]
    for near in NodeWalk(roots, order=Order.NEAREST, limit=MAX_NODES, key=None):
        name = type(near).__name__
        if name in TARGETS:
            target = saved(near, "_saved_target", None)
            return (name, target) if isinstance(target, torch.Tensor) else None
    return None


def _distinct(target: torch.Tensor) -> int:
    """The targets the batch holds: a target broadcast over Monte Carlo samples, particles
    or ensemble members (`y.expand(M, -1)`, stride 0 along those dimensions) holds each
    one once, not once per copy."""
    copies = 1
    for size, stride in zip(target.shape, target.stride(), strict=True):
        if stride == 0:
            copies *= size
    return target.numel() // max(copies, 1)


def _targets(node: Any) -> list[tuple[str, torch.Tensor]]:
    """Every loss node's name and target among the nodes nearest the loss, nearest first
    (the walk `target_of` takes): a loss of several terms has a target per term."""
    roots = [] if node is None else [node]
    out = []
    for near in NodeWalk(roots, order=Order.NEAREST, limit=MAX_NODES, key=None):
        name = type(near).__name__
        target = saved(near, "_saved_target", None) if name in TARGETS else None
        if isinstance(target, torch.Tensor):
            out.append((name, target))
    return out


def _all_equal(before: list[torch.Tensor], now: list[torch.Tensor]) -> torch.Tensor | bool:
    """A device bool: the other terms' targets are those of the step before, each by
    value; False where they differ in number or shape (a batch of other lengths)."""
    if len(before) != len(now) or any(
        a.shape != b.shape or a.device != b.device for a, b in zip(before, now, strict=True)
    ):
        return False
    if not now:
        return True
    with torch.no_grad():
        return torch.stack(
            [(a == b.detach()).all() for a, b in zip(before, now, strict=True)]
        ).all()


def _indices(target: torch.Tensor) -> bool:
    """A 1-d tensor of class indices (a cross-entropy's targets), two at least."""
    return (
        target.dim() == 1
        and target.numel() >= 2
        and not target.is_floating_point()
        and not target.is_complex()
    )


def _by_construction(target: torch.Tensor) -> torch.Tensor:
    """A device bool: the same in every batch by construction: one value throughout (a
    GAN's real labels, MoCo's positive placed first) or class indices that are the
    positions 0..n-1 in some order (CLIP's, SimCLR's labels). An empty target (a
    detector's box loss on a batch with no object) is not: it has no value to repeat."""
    with torch.no_grad():
        flat = target.detach().reshape(-1)
        if flat.numel() == 0:
            return torch.zeros((), dtype=torch.bool, device=flat.device)
        built = (flat == flat[0]).all()
        if _indices(target):
            positions = torch.arange(flat.numel(), device=flat.device, dtype=flat.dtype)
            built = built | (flat.sort().values == positions).all()
    return built


def _laid_out(target: torch.Tensor) -> torch.Tensor:
    """A device bool: labels laid out by the script, not read from data: class indices or
    0/1 labels in sorted blocks (NCF's positives then its sampled negatives, a few-shot
    episode's arange(N).repeat_interleave(Q)) or arange(k) in turns (arange(N).repeat(Q)).
    The same tensor in every step while the samples they label are drawn anew."""
    with torch.no_grad():
        flat = target.detach().reshape(-1)
        rising, falling = (flat[1:] >= flat[:-1]).all(), (flat[1:] <= flat[:-1]).all()
        if target.is_floating_point():
            return ((flat == 0) | (flat == 1)).all() & (rising | falling)
        at = torch.arange(flat.numel(), device=flat.device, dtype=flat.dtype)
        k = (flat.max() + 1).clamp(min=1)
        turns = (flat.numel() % k == 0) & (flat == at % k).all()
    return rising | falling | turns


def _same(before: torch.Tensor, now: torch.Tensor, built: torch.Tensor) -> torch.Tensor | None:
    """A device bool: identical and not the same by construction (`built`); None where the
    shapes differ (not the same batch, nothing to read back)."""
    if before.shape != now.shape or before.dtype != now.dtype or now.numel() < 2:
        return None
    with torch.no_grad():
        return (before.reshape(-1) == now.detach().reshape(-1)).all() & ~built
