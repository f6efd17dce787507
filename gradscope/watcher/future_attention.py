"""How much attention a next-token model's queries put on later positions: a causal mask
missing (scaled_dot_product_attention without is_causal, a TransformerEncoderLayer used as
a decoder without its mask), dropped (a hand-written attention without its masked_fill)
or wrong (triu for tril), so each position sees the token it is trained to predict.

At the forwards of steps 1-STEPS the patched `scaled_dot_product_attention` and softmax of
square attention scores compute on the device, for their first batch element (at most
MAX_ROWS positions and MAX_HEADS heads), the share of each query position's attention on
later keys, and the token lookups (nn.Embedding
calls) their queries and keys come from (attention_sources.py). At the step's first
backward, target_leak.py's reading says which lookups read the cross-entropy's targets
shifted by one (a next-token objective) and which positions its loss counts; an attention
over such a lookup keeps its share at those positions. Read back once when the run ends."""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import torch

from gradscope.steps.state_facts import FutureAttended
from gradscope.watcher.attention_sources import Sources, factors
from gradscope.watcher.target_leak import Objective

PART = "the causal-mask probe"
STEPS = 3
"""The steps whose attention calls are measured (nothing is done at later ones)."""
MAX_CALLS = 64
"""Attention calls measured at most per step (the first ones)."""
MAX_ROWS = 256
"""Query positions measured at most per call (evenly spaced): a long context's L × L
probabilities would cost what the attention itself does."""
MAX_HEADS = 4
"""Heads measured at most per call (the first ones)."""
MAX_FRAMES = 8
"""Frames walked up from the attention call to the module that made it."""


@dataclass
class _Call:
    step: int
    module: int
    """id of the nn.Module whose forward made the call (0: none)."""
    shared: frozenset[int]
    """The lookups below both its queries and its keys (self-attention over them)."""
    length: int
    rows: torch.Tensor
    """Device: the query positions measured."""
    later: torch.Tensor
    """Device: at each of them, the attention's share on later keys."""


@dataclass
class FutureAttention:
    calls: list[_Call] = field(default_factory=list)
    reads: list[tuple[tuple[int, int], int, torch.Tensor]] = field(default_factory=list)
    """((module, its call's place among the module's calls of the step), step, device
    [read the shifted targets, share on later keys at the counted positions, counted
    positions])."""
    sources: Sources = field(default_factory=Sources)
    last: tuple[int, int, int] = (0, 0, 0)
    """(step, module id, id of the scores) of the last softmax measured: F.softmax calls
    the tensor method, both patched."""
    owners: dict[int, tuple[Any, str]] = field(default_factory=dict)
    """id of a module that made a call → (a weak reference to it, its class's name): named
    at the end, when the watch knows the models (not yet at step 1's forward)."""
    read_up_to: int = 0
    """The last step whose first backward was read: its later forwards (the next
    micro-batches, or every batch of a loop that updates by hand and never steps an
    optimizer) are not measured."""
    off: bool = False
    on_fault: Callable[[str, BaseException], None] = lambda part, exc: None
    """Told of a failure at a backward (the probe switches itself off; the watch goes on)."""

    def wants(self, step: int) -> bool:
        """Whether the forwards of step `step` are measured."""
        return step <= STEPS and step > self.read_up_to and not self.off

    def attend(self, step: int, q: Any, k: Any, mask: Any, causal: bool, scale: Any) -> None:
        """A scaled_dot_product_attention call of step `step`."""
        if not _plain(q) or not _plain(k) or q.dim() < 2:
            return
        length = q.shape[-2]
        if k.shape[-2] != length or length < 2:
            return  # not self-attention over one sequence (a cache, a cross-attention)
        shared = self._shared(step, q.grad_fn, k.grad_fn)
        if shared:
            module = self._owner()
            with torch.no_grad():
                rows = _rows(length, q.device)
                probs = _sdpa_probs(q.detach(), k.detach(), rows, mask, causal, scale)
                self.calls.append(_Call(step, module, shared, length, rows, _later(probs, rows)))

    def scores(self, step: int, scores: Any, dim: Any) -> None:
        """A softmax of step `step` over the last axis of square 3-d or 4-d scores."""
        if not _plain(scores) or scores.dim() not in (3, 4):
            return
        if dim not in (-1, scores.dim() - 1) or scores.grad_fn is None:
            return
        if scores.shape[-1] != scores.shape[-2] or scores.shape[-1] < 2:
            return
        module = self._owner()
        key = (step, module, id(scores))
        if key == self.last:
            return
        self.last = key
        shared = self._shared(step, *factors(scores))
        if shared:
            with torch.no_grad():
                length, first = scores.shape[-1], scores.detach()[0]
                rows = _rows(length, scores.device)
                first = first[:MAX_HEADS] if first.dim() == 3 else first
                probs = torch.softmax(first.index_select(-2, rows).float(), -1)
                self.calls.append(_Call(step, module, shared, length, rows, _later(probs, rows)))

    def _shared(self, step: int, queries: Any, keys: Any) -> frozenset[int]:
        """The lookups below both the queries' and the keys' nodes (none: not judged)."""
        self.sources.begin(step)
        self.calls = [c for c in self.calls if c.step == step]
        if queries is None or keys is None or len(self.calls) >= MAX_CALLS:
            return frozenset()
        q, k = self.sources.of(queries), self.sources.of(keys)
        return q & k if q is not None and k is not None else frozenset()

    def observe(self, objective: Objective | None, step: int) -> None:
        """The first backward of step `step`: its attention calls over a lookup the loss
        reaches keep their share on later keys at the positions the loss counts."""
        calls, self.calls = [c for c in self.calls if c.step == step], []
        self.sources.clear()
        self.read_up_to = max(self.read_up_to, step)
        if objective is None or self.off:
            return
        try:
            self._keep(calls, objective, step)
        except Exception as exc:
            self.off = True
            self.on_fault(PART, exc)

    def _keep(self, calls: list[_Call], objective: Objective, step: int) -> None:
        """Each call's share at the counted positions, with whether its lookups read the
        targets shifted by one (device values)."""
        at = {id(e): i for i, e in enumerate(objective.readers)}
        made: dict[int, int] = {}
        with torch.no_grad():
            for call in calls:
                nth = made[call.module] = made.get(call.module, -1) + 1
                readers = sorted(at[e] for e in call.shared if e in at)
                row = _counted_row(objective, readers, call.length)
                if row is None:
                    continue
                shifted = torch.stack([objective.shifted[i] for i in readers]).any()
                rows = call.rows.to(row.device)
                row = row & _own_token_counted(row)
                w = (row[rows] & (rows < call.length - 1)).float().to(call.later.device)
                share = (call.later * w).sum() / w.sum().clamp(min=1)
                kept = torch.stack([shifted.float().to(w.device), share, w.sum()])
                self.reads.append(((call.module, nth), step, kept))

    def facts(self, roots: Any) -> tuple[FutureAttended, ...]:
        """Each module's reads, in one transfer, named in the watched models `roots`."""
        if not self.reads:
            return ()
        device = self.reads[0][2].device
        flat = torch.cat([v.to(device) for _, _, v in self.reads]).tolist()
        names = self._names(roots)
        by_module: dict[str, list[tuple[int, bool, float]]] = {}
        for i, ((module, nth), step, _) in enumerate(self.reads):
            shifted, share, counted = flat[3 * i : 3 * i + 3]
            name = names.get(module, "attention") + (f" (call {nth + 1})" if nth else "")
            if counted > 0:
                by_module.setdefault(name, []).append((step, shifted > 0, share))
        self.reads, self.owners = [], {}
        return tuple(
            FutureAttended(
                module,
                tuple(s for s, _, _ in reads),
                tuple(s for s, shifted, _ in reads if shifted),
                tuple(share for _, _, share in reads),
            )
            for module, reads in by_module.items()
        )

    def _owner(self) -> int:
        """The id of the innermost nn.Module whose forward is on the stack (0: none)."""
        frame: FrameType | None = sys._getframe(2)
        for _ in range(MAX_FRAMES):
            if frame is None:
                return 0
            owner = frame.f_locals.get("self")
            if isinstance(owner, torch.nn.Module):
                if id(owner) not in self.owners:
                    self.owners[id(owner)] = (weakref.ref(owner), type(owner).__name__)
                return id(owner)
            frame = frame.f_back
        return 0

    def _names(self, roots: Any) -> dict[int, str]:
        """id of each module that made a call → its name in the watched models, else its
        class's name."""
        found: dict[int, str] = {}
        for r, root in enumerate(roots):
            for name, m in root.named_modules():
                found.setdefault(id(m), (f"{r}." if len(roots) > 1 else "") + name)
        names = {}
        for key, (ref, kind) in self.owners.items():
            alive = ref()
            names[key] = found.get(key, "") if alive is not None else ""
            names[key] = names[key] or kind
        return names


def _plain(t: Any) -> bool:
    """A dense tensor of one process: a sharded (DTensor) or nested one is not measured."""
    return type(t) is torch.Tensor and not t.is_nested


def _rows(length: int, device: torch.device) -> torch.Tensor:
    """The query positions measured: all, or MAX_ROWS evenly spaced."""
    if length <= MAX_ROWS:
        return torch.arange(length, device=device)
    return torch.linspace(0, length - 1, MAX_ROWS, device=device).long()


def _sdpa_probs(
    q: torch.Tensor, k: torch.Tensor, rows: torch.Tensor, mask: Any, causal: bool, scale: Any
) -> torch.Tensor:
    """The attention probabilities of the first batch element's first heads at `rows`, as
    SDPA computes them from its mask (boolean: True attends; float: added) and is_causal."""
    q1, k1 = (q[0], k[0]) if q.dim() >= 3 else (q, k)
    if q1.dim() >= 3 and k1.dim() >= 3 and k1.shape[-3] != q1.shape[-3]:
        k1 = k1.repeat_interleave(q1.shape[-3] // max(1, k1.shape[-3]), dim=-3)
    if q1.dim() >= 3:
        q1, k1 = q1[..., :MAX_HEADS, :, :], k1[..., :MAX_HEADS, :, :]
    s = torch.matmul(q1.index_select(-2, rows).float(), k1.float().transpose(-2, -1))
    s = s * (float(scale) if scale is not None else q1.shape[-1] ** -0.5)
    if isinstance(mask, torch.Tensor):
        m = mask.detach().to(s.device)
        m = m[0] if m.dim() == q.dim() and m.dim() >= 3 else m
        m = m.index_select(-2, rows) if m.dim() >= 2 and m.shape[-2] > 1 else m
        m = m[..., :MAX_HEADS, :, :] if m.dim() >= 3 else m
        s = s.masked_fill(~m, float("-inf")) if m.dtype == torch.bool else s + m.float()
    if causal:
        s = s.masked_fill(_after(rows, s.shape[-1]), float("-inf"))
    return torch.softmax(s, -1)


def _later(probs: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """At each measured query position, the probability on later keys, averaged over
    heads; a row masked whole (NaN) puts none there."""
    later = (probs.nan_to_num(0.0) * _after(rows, probs.shape[-1])).sum(-1)
    return later.reshape(-1, len(rows)).mean(0)


def _after(rows: torch.Tensor, length: int) -> torch.Tensor:
    """(rows, length) bools: the keys after each row's position."""
    return rows[:, None] < torch.arange(length, device=rows.device)[None, :]


def _counted_row(objective: Objective, readers: list[int], length: int) -> torch.Tensor | None:
    """Whether the loss counts each position of the first sequence, laid out as the ids
    the first of the lookups that read one id per target read them (batch-first, or
    sequence-first as torch's word-language model), or a start token then the targets,
    sliced after the lookup; None where its sequences are not `length` long (a position
    table's lookup reads one sequence for the batch)."""
    counted = objective.counted
    layouts = [objective.layouts[i] for i in readers]
    layout = next((s for s in layouts if s and _numel(s) == counted.numel()), None)
    started = any(s and s[-1] == length + 1 for s in layouts)  # a start token, the targets
    if layout is None and started and counted.numel() % length == 0:
        return counted.reshape(-1, length)[0]
    if layout is None:
        return None
    if layout[-1] == length:
        return counted.reshape(-1, length)[0]
    if layout[0] == length:
        return counted.reshape(length, -1)[:, 0]
    return None


def _own_token_counted(row: torch.Tensor) -> torch.Tensor:
    """Whether the token at each position is itself a target the loss counts (the one
    before it predicts it; the first position has none before it). A padding or prompt
    position is ignored as a target: under a mask that leaves its query no key (left
    padding, Hugging Face's eager attention) its softmax spreads over every key, later
    ones too, though the last one's own target counts."""
    return torch.cat([torch.ones_like(row[:1]), row[:-1]])


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n
