"""The logits a run's softmaxes see, sampled: the largest pre-softmax attention logit per
attention module and the output logits' log-partition at the cross-entropy.

Both grow for hundreds of steps before a run diverges (Wortsman et al. 2023): attention
logits until the softmax saturates to one key, the output logits' logsumexp (log Z) away
from where the loss's gradient holds it, since a softmax ignores a shift of every logit.
On a sampled step (SAMPLE_EVERY) the patched `scaled_dot_product_attention`, the softmax
of 4-d attention scores and `cross_entropy` compute these on the device from their own
inputs (the attention's on its first batch element only): a few small kernels, no read.
Everything is read back once, when the run ends (watcher/run_facts.py).
"""

from __future__ import annotations

import os
import sys
import weakref
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import torch

from gradscope.steps.logit_facts import AttentionSeries, OutputLogits, WeightNorm

SAMPLE_EVERY = 16
"""Steps 16, 32, ... are sampled; after LATE_STEP every LATE_EVERY-th."""
LATE_STEP = 16_384
LATE_EVERY = 256
MAX_MODULES = 64
"""Attention modules followed at most (the first ones called)."""
MAX_ROWS = 256
"""Rows of the logits given to cross_entropy measured (the first ones): a logsumexp over a
language model's whole vocabulary for every row would cost more than the loss itself."""
MAX_FRAMES = 8
MAX_WEIGHTS = 32
"""Tensors whose norm is sampled with the output logits at most: the output head's weight
and the first norm layers' gains (one foreach norm on the device, no read)."""
"""Frames walked up from the attention call to the module that made it."""


def sampled(step: int) -> bool:
    """Whether the forward of step `step` (1-based) is measured."""
    return step % (SAMPLE_EVERY if step <= LATE_STEP else LATE_EVERY) == 0


@dataclass
class LogitProbe:
    attention: dict[str, list[tuple[int, torch.Tensor]]] = field(default_factory=dict)
    """Module name → (step, device max |logit|) of each sampled step."""
    output: list[tuple[int, torch.Tensor]] = field(default_factory=list)
    """(step, device [mean log Z, max log Z, mean logit]) of each sampled step."""
    classes: int = 0
    names: dict[int, str] = field(default_factory=dict)
    roots: int = -1
    off: bool = False
    weighed: list[tuple[str, str, torch.Tensor]] | None = None
    """(name, kind, parameter) of the head and the norm gains, found at the first sample."""
    pending: tuple[int, Any, torch.Tensor, torch.Tensor, int] | None = None
    """(step, a weak reference to its output, the log-partition and the mean logit of its
    rows, classes) of the step's last log_softmax: a cross-entropy written as
    nll_loss(log_softmax(x))."""

    def attend(self, step: int, q: Any, k: Any, scale: Any, causal: bool, roots: Any) -> None:
        """A scaled_dot_product_attention call of step `step`: its largest |q·kᵀ|·scale."""
        if not isinstance(q, torch.Tensor) or not isinstance(k, torch.Tensor) or q.dim() < 2:
            return
        name = self._module(roots)
        series = self.attention.get(name)
        if series is None:
            if len(self.attention) >= MAX_MODULES:
                return
            series = self.attention[name] = []
        if series and series[-1][0] == step:
            return  # a second micro-batch of the step
        with torch.no_grad():
            q1, k1 = _first(q.detach()), _first(k.detach())
            if q1.dim() >= 3 and k1.dim() >= 3 and k1.shape[-3] != q1.shape[-3]:
                k1 = k1.repeat_interleave(q1.shape[-3] // max(1, k1.shape[-3]), dim=-3)
            s = torch.matmul(q1.float(), k1.float().transpose(-2, -1))
            s = s * (float(scale) if scale is not None else q1.shape[-1] ** -0.5)
            if causal:
                s = s.tril()
            series.append((step, s.abs().amax()))

    def scores(self, step: int, scores: Any, dim: Any, roots: Any) -> None:
        """A softmax over the last axis of square 4-d attention scores (q @ kᵀ, masked)."""
        if not isinstance(scores, torch.Tensor) or scores.dim() != 4:
            return
        if dim not in (-1, 3) or scores.shape[-1] != scores.shape[-2] or scores.shape[-1] < 2:
            return
        name = self._module(roots)
        series = self.attention.setdefault(name, []) if len(self.attention) < MAX_MODULES else None
        if series is None or (series and series[-1][0] == step):
            return
        with torch.no_grad():
            s = scores.detach()[0].float().abs()
            series.append((step, torch.where(torch.isfinite(s), s, 0.0).amax()))

    def log_softmax(self, step: int, logits: Any, out: Any, dim: Any) -> None:
        """A log_softmax of the step: log Z of its rows is its input less its output at
        any class (the first), kept with a weak reference to the output until the step's
        nll_loss."""
        if not isinstance(logits, torch.Tensor) or not isinstance(out, torch.Tensor):
            return
        if not isinstance(dim, int) or logits.dim() == 0 or not logits.is_floating_point():
            return
        if self.output and self.output[-1][0] == step:
            return
        with torch.no_grad():
            first = logits.detach().select(dim, 0).float() - out.detach().select(dim, 0).float()
            level = logits.detach().float().mean(dim).reshape(-1)[:MAX_ROWS]
            rows = first.reshape(-1)[:MAX_ROWS]
            self.pending = (step, weakref.ref(out), rows, level, logits.shape[dim])

    def nll_loss(self, step: int, logprobs: Any, roots: Any = ()) -> None:
        """nll_loss over the output of the step's last log_softmax (or a view of it): that
        log_softmax's log-partition, as at cross_entropy."""
        pending, self.pending = self.pending, None
        if pending is None or pending[0] != step or not isinstance(logprobs, torch.Tensor):
            return
        out = pending[1]()
        if out is None or logprobs.untyped_storage().data_ptr() != out.untyped_storage().data_ptr():
            return
        self._partition(step, pending[2], pending[3], pending[4], roots)

    def cross_entropy(self, step: int, logits: Any, roots: Any = ()) -> None:
        """The logits given to cross_entropy: their log-partition per row (the first
        MAX_ROWS), mean and max."""
        if not isinstance(logits, torch.Tensor) or not logits.is_floating_point():
            return
        if logits.numel() == 0 or (self.output and self.output[-1][0] == step):
            return
        dim = 1 if logits.dim() >= 2 else 0
        with torch.no_grad():
            rows = logits.detach()[:MAX_ROWS] if dim == 1 else logits.detach()
            z = torch.logsumexp(rows.float(), dim=dim)
            self._partition(step, z, rows.float().mean(dim), int(logits.shape[dim]), roots)

    def _partition(
        self, step: int, z: torch.Tensor, level: torch.Tensor, classes: int, roots: Any
    ) -> None:
        """The step's log Z per row: its mean and max kept (the step's first only), the
        mean logit (the level a softmax ignores), with the norms of the head's weight and
        the norm gains."""
        if self.output and self.output[-1][0] == step:
            return
        if self.weighed is None:
            self.weighed = _head_and_gains(roots, classes)
        weights = [p.detach() for _, _, p in self.weighed]
        norms = torch._foreach_norm(weights) if weights else []
        kept = [z.mean(), z.amax(), level.mean(), *(n.float().to(z.device) for n in norms)]
        self.output.append((step, torch.stack(kept)))
        self.classes = classes

    def _module(self, roots: Any) -> str:
        """The name of the watched module whose forward made this call (its `self`)."""
        if len(roots) != self.roots:
            self.roots = len(roots)
            self.names = {}
            for r, root in enumerate(roots):
                for name, m in root.named_modules():
                    self.names.setdefault(id(m), (f"{r}." if len(roots) > 1 else "") + name)
        frame: FrameType | None = sys._getframe(2)
        caller = None
        for _ in range(MAX_FRAMES):
            if frame is None:
                break
            owner = frame.f_locals.get("self")
            if owner is not None and id(owner) in self.names:
                return self.names[id(owner)] or type(owner).__name__
            if caller is None and not frame.f_code.co_filename.startswith(_OURS):
                caller = frame.f_code.co_name
            frame = frame.f_back
        return f"{caller}()" if caller else "attention"

    def facts(self) -> tuple[tuple[AttentionSeries, ...], OutputLogits | None]:
        """Everything sampled, read back in one transfer."""
        values = [v for s in self.attention.values() for _, v in s] + [v for _, v in self.output]
        if not values:
            return (), None
        device = values[0].device
        flat = torch.cat([v.reshape(-1).to(device) for v in values]).tolist()
        attention, at = [], 0
        for name, series in self.attention.items():
            steps = tuple(s for s, _ in series)
            attention.append(AttentionSeries(name, steps, tuple(flat[at : at + len(steps)])))
            at += len(steps)
        output = None
        if self.output:
            weighed, width = self.weighed or [], 3 + len(self.weighed or [])
            rows = [flat[at + width * i : at + width * (i + 1)] for i in range(len(self.output))]
            output = OutputLogits(
                tuple(s for s, _ in self.output),
                tuple(r[0] for r in rows),
                tuple(r[1] for r in rows),
                self.classes,
                tuple(
                    WeightNorm(name, kind, tuple(r[3 + j] for r in rows))
                    for j, (name, kind, _) in enumerate(weighed)
                ),
                tuple(r[2] for r in rows),
            )
        self.attention, self.output = {}, []
        return tuple(attention), output


_OURS = (
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    os.path.dirname(os.path.abspath(torch.__file__)),
)
"""gradscope's and torch's own files: a call made outside every watched module is named
by the first function outside them."""


def _head_and_gains(roots: Any, classes: int) -> list[tuple[str, str, torch.Tensor]]:
    """The output head's weight (the last 2-d weight of a watched module with a row per
    class: a tied embedding too) and the gains of the first norm layers (a 1-d weight of a
    module whose class is named *Norm*), plain tensors only: a sharded one's norm would
    need its ranks."""
    head: tuple[str, str, torch.Tensor] | None = None
    gains: list[tuple[str, str, torch.Tensor]] = []
    seen: set[int] = set()
    for r, root in enumerate(roots):
        for name, module in root.named_modules():
            w = getattr(module, "weight", None)
            if not isinstance(w, torch.nn.Parameter) or type(w.detach()) is not torch.Tensor:
                continue
            full = (f"{r}." if len(roots) > 1 else "") + (f"{name}.weight" if name else "weight")
            if w.dim() == 2 and w.shape[0] == classes:
                head = (full, "head", w)
            elif w.dim() == 1 and "Norm" in type(module).__name__ and id(w) not in seen:
                seen.add(id(w))
                gains.append((full, "norm gain", w))
    return ([head] if head else []) + gains[: MAX_WEIGHTS - 1]


def _first(t: torch.Tensor) -> torch.Tensor:
    """The first element of a batched [B, ..., L, E] tensor (all of a 2-d one)."""
    return t[0] if t.dim() >= 3 else t
