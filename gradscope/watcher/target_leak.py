"""Whether a cross-entropy's targets are the tokens its model was fed at the same positions:
teacher forcing without the shift (nanoGPT's `y = x` for `x[1:]`, a decoder given the
unshifted caption).

torch's graph keeps both: NllLossBackward0 its target, EmbeddingBackward0 the indices the
embedding read. At the steps same_batch reads (1-3, then pairs every 25, every 500 after
step 101), the embeddings the loss reaches are found and compared with the targets on the
device, read back once when the run ends. An embedding counts only when a path from the
loss reaches it without passing a bottleneck: a reduction or a broadcast over positions
(a mean, a select, an expand, a repeat), a recurrent layer's final state, or a flatten of
the positions into one feature vector (an MLP over the whole sequence, whose width is the
code). An autoencoder
reconstructs its input through one, so its encoder's embedding reads the targets by
design; a seq2seq autoencoder's decoder reads them shifted (a reader of the shifted
targets marks the run a next-token objective with its source: silent). Masked and
denoising objectives differ at the positions that count (ignore_index left out).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from gradscope.autograd_walk import NodeWalk, Order, inputs, saved
from gradscope.steps.state_facts import TargetCopies
from gradscope.watcher.loss_inputs import saved_dim
from gradscope.watcher.loss_weights import kept_positions
from gradscope.watcher.padding import padded_targets, read_padded
from gradscope.watcher.same_batch import wanted
from gradscope.watcher.time_shift import shifted_inputs

LOSSES = ("NllLossBackward0", "NllLoss2DBackward0")
GATHERED = "GatherBackward0"
"""Log-probabilities gathered by the targets along the class axis: the cross-entropy a
masked diffusion (MDLM, SEDD, D3PM) or a policy gradient writes by hand. Its weights (a
0 for the positions that do not count) are applied after (a mask right after it is read:
loss_weights.py): only the copy is read from it, not the padding or the attention of the
positions that count."""
NEAR = 16
"""Nodes below the loss searched for its NLL node."""
MAX_NODES = 20_000
"""Nodes walked at most per read (a GPT-2's graph is a few thousand)."""
MAX_READS = 64
BOTTLENECKS = frozenset(
    {
        "MeanBackward0",
        "MeanBackward1",
        "SumBackward0",
        "SumBackward1",
        "MaxBackward0",
        "MaxBackward1",
        "AmaxBackward0",
        "MinBackward0",
        "MinBackward1",
        "AminBackward0",
        "SelectBackward0",
        "ExpandBackward0",
        "RepeatBackward0",
    }
)
"""Nodes that reduce or broadcast positions: what lies below reaches the loss only through
a summary of the sequence (a pooled code, the last state, a vector repeated over time)."""
VIEWS = frozenset({"ViewBackward0", "UnsafeViewBackward0", "ReshapeAliasBackward0"})


@dataclass(frozen=True)
class Objective:
    """What a step's first backward showed: the token lookups the loss
    reaches, whether each read the targets shifted by one (device bools), the shape of
    the ids each read, and the positions the loss counts (its targets' layout)."""

    readers: list[Any]
    shifted: list[torch.Tensor]
    layouts: list[tuple[int, ...]]
    counted: torch.Tensor


@dataclass
class TargetLeak:
    reads: list[tuple[int, torch.Tensor, torch.Tensor, list[str]]] = field(default_factory=list)
    """(step, device bools: each direct embedding read the targets at every counted position,
    device bool: some embedding read them shifted by one, the direct embeddings' tables)."""
    pads: list[tuple[int, int, torch.Tensor]] = field(default_factory=list)
    """(step, padding_idx, device [padded positions, counted positions]) of the reads whose
    direct embedding has a padding_idx (padding.py)."""

    def observe(self, loss: torch.Tensor, step: int) -> Objective | None:
        """The first backward of step `step` runs from `loss`: what was read, for
        future_attention.py."""
        if not wanted(step) or len(self.reads) >= MAX_READS or loss.grad_fn is None:
            return None
        found = _nll(loss.grad_fn)
        if found is None:
            return None
        node, target, ignore = found
        gathered = type(node).__name__ == GATHERED
        direct = _embeddings(node, pruned=True)
        if not direct:
            return None
        counted = target != ignore
        kept = kept_positions(loss.grad_fn, node, target)
        counted = counted if kept is None else counted & kept
        readers = _embeddings(node, pruned=False)
        with torch.no_grad():
            copied = [_copied(e, target, counted) for e in direct]
            shifted = [_shifted(e, target, counted) for e in readers]
            pad = None if gathered else padded_targets(direct, target, counted)
        shifted_any = torch.stack(shifted).any() if shifted else _false(target)
        tables = ["×".join(str(d) for d in _table(e)) for e in direct]
        self.reads.append((step, torch.stack(copied), shifted_any, tables))
        if pad is not None:
            self.pads.append((step, *pad))
        if gathered:
            return None
        layouts = [tuple(i.shape) if (i := _indices(e)) is not None else () for e in readers]
        return Objective(readers, shifted, layouts, counted)

    def facts(self) -> list[TargetCopies]:
        if not self.reads:
            return []
        device = self.reads[0][1].device
        flags = torch.cat(
            [torch.cat([c.to(device), s.to(device).reshape(1)]) for _, c, s, _ in self.reads]
        ).tolist()  # one read back
        steps, copied, shifted, table = [], [], [], ""
        for step, c, _, tables in self.reads:
            mine, flags = flags[: len(c) + 1], flags[len(c) + 1 :]
            steps.append(step)
            if any(mine[:-1]):
                copied.append(step)
                table = table or tables[mine.index(True)]
            if mine[-1]:
                shifted.append(step)
        self.reads = []
        padded, padding = read_padded(self.pads)
        self.pads = []
        return [TargetCopies(tuple(steps), tuple(copied), tuple(shifted), table, padded, padding)]


def _nll(root: Any) -> tuple[Any, torch.Tensor, int] | None:
    """The NLL node nearest the loss, with its class-index target and ignore_index, or a
    gather of one index per position along the last axis (GATHERED: every position counts)."""
    for near in NodeWalk([root], order=Order.NEAREST, limit=NEAR, key=None):
        if type(near).__name__ == GATHERED:
            picked = _gathered(near)
            if picked is not None:
                return near, picked, -1
            continue
        if type(near).__name__ not in LOSSES:
            continue
        target = saved(near, "_saved_target", None)
        if not isinstance(target, torch.Tensor) or target.is_floating_point():
            return None
        if target.numel() < 4 or target.dtype == torch.bool:
            return None
        ignore = int(saved(near, "_saved_ignore_index", -100))
        return near, target.detach(), ignore - (1 << 64) if ignore >= 1 << 63 else ignore
    return None


def _gathered(node: Any) -> torch.Tensor | None:
    """The class indices a gather picked, one per position along its last axis (index
    [..., 1]), as targets; None for any other gather (rows picked, several per position)."""
    index = saved(node, "_saved_index", None)
    if not isinstance(index, torch.Tensor) or index.is_floating_point() or index.dim() < 2:
        return None
    if index.shape[-1] != 1 or saved_dim(saved(node, "_saved_dim", None), index.dim()) != (
        index.dim() - 1
    ):
        return None
    picked = index.detach().squeeze(-1)
    return picked if picked.numel() >= 4 and bool((picked >= 0).all()) else None


def _embeddings(node: Any, *, pruned: bool) -> list[Any]:
    """The EmbeddingBackward0 nodes below `node`; `pruned`: only those reached by a path that
    passes no bottleneck."""
    below = _direct_inputs if pruned else inputs
    walk = NodeWalk([node], below, order=Order.REACHED, limit=MAX_NODES)
    return [n for n in walk if type(n).__name__ == "EmbeddingBackward0"]


def _direct_inputs(node: Any) -> list[Any]:
    """A node's inputs, none through a bottleneck: a reduction or broadcast over positions
    (pruned there), a flatten of positions into features, or a recurrent layer's final state
    (its outputs 1 and 2, h_n and c_n), nor one moved later along the positions (a state
    shifted after its encoder: time_shift.py)."""
    if type(node).__name__ in BOTTLENECKS or _flattens_positions(node):
        return []
    moved = shifted_inputs(node)
    return [
        n
        for i, (n, output) in enumerate(getattr(node, "next_functions", ()))
        if n is not None and i not in moved and not (output != 0 and "Rnn" in type(n).__name__)
    ]


def _flattens_positions(node: Any) -> bool:
    """A (batch, positions, features) tensor viewed as (batch, positions × features): every
    position mixed into one vector, as an MLP autoencoder's encoder does. A head merge is
    4-D, a loss's `view(-1, V)` merges the batch and positions instead."""
    if type(node).__name__ not in VIEWS:
        return False
    sizes = saved(node, "_saved_self_sym_sizes", None)
    meta = getattr(node, "_input_metadata", ())
    if sizes is None or len(sizes) != 3 or not meta:
        return False
    _, positions, features = (int(s) for s in sizes)
    flat = [int(s) for s in meta[0].shape]
    return positions > 1 and features > 1 and flat == [int(sizes[0]), positions * features]


def _indices(embedding: Any) -> torch.Tensor | None:
    found = saved(embedding, "_saved_indices", None)
    return found.detach() if isinstance(found, torch.Tensor) else None


def _copied(embedding: Any, target: torch.Tensor, counted: torch.Tensor) -> torch.Tensor:
    """A device bool: the indices are the targets at every counted position (four at least,
    not all one token)."""
    idx = _indices(embedding)
    if idx is None or idx.numel() != target.numel() or idx.device != target.device:
        return _false(target)
    i, t, c = idx.reshape(-1), target.reshape(-1), counted.reshape(-1)
    low = torch.where(c, t, torch.full_like(t, torch.iinfo(t.dtype).max)).min()
    high = torch.where(c, t, torch.full_like(t, torch.iinfo(t.dtype).min)).max()
    return ((i == t) | ~c).all() & (c.sum() >= 4) & (high > low)


def _shifted(embedding: Any, target: torch.Tensor, counted: torch.Tensor) -> torch.Tensor:
    """A device bool: the indices are the targets shifted by one along the last axis, or
    the first of a sequence-first batch (a teacher-forced decoder: it reads token t and is
    trained to give token t + 1)."""
    idx = _indices(embedding)
    if idx is None or idx.dim() < 1 or idx.device != target.device:
        return _false(target)
    if idx.numel() != target.numel():
        return _prefixed(idx, target, counted)
    t, c = target.reshape(idx.shape), counted.reshape(idx.shape)
    found = _false(target)
    for axis in {idx.dim() - 1, 0}:
        if idx.shape[axis] >= 3:
            n = idx.shape[axis] - 1
            keep = c.narrow(axis, 0, n)
            same = idx.narrow(axis, 1, n) == t.narrow(axis, 0, n)
            found = found | ((same | ~keep).all() & keep.any())
    return found


def _prefixed(idx: torch.Tensor, target: torch.Tensor, counted: torch.Tensor) -> torch.Tensor:
    """A device bool: the lookup read a start token, then the targets (SLATE's and many
    decoders' `cat([bos, tokens])`, embedded whole and sliced to its first T positions
    after the lookup): one position longer along its last axis, the rest the targets."""
    rows = idx.numel() // idx.shape[-1] if idx.shape[-1] else 0
    n = idx.shape[-1] - 1
    if n < 3 or rows * n != target.numel():
        return _false(target)
    t, c = target.reshape(rows, n), counted.reshape(rows, n)
    same = idx.reshape(rows, n + 1)[:, 1:] == t
    return (same | ~c).all() & c.any()


def _table(embedding: Any) -> tuple[int, ...]:
    for n, _ in getattr(embedding, "next_functions", ()):
        weight = getattr(n, "variable", None)
        if isinstance(weight, torch.Tensor):
            return tuple(weight.shape)
    return ()


def _false(like: torch.Tensor) -> torch.Tensor:
    return torch.zeros((), dtype=torch.bool, device=like.device)
