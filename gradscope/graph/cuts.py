"""Where the forward cut the graph, so the picture can show it (`.detach()` at file:line).

A cut leaves no trace in the autograd graph: the detached tensor is a plain input of
the op that uses it next. During the traced forward, a TorchFunctionMode notes every
op whose input requires grad but whose floating-point output does not (`.detach()`,
`.data`, a `no_grad` region, ...), and then the backward node of the op that consumed
such an output: that node gets a cut marker drawn into it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from gradscope.errors import user_line
from gradscope.inspector import hooks
from gradscope.inspector.replay import CUT_KINDS, in_reentrant_checkpoint, op_name


@dataclass
class Cuts:
    sites: dict[int, list[str]] = field(default_factory=dict)
    """id(backward node that consumed a cut tensor) → where it was cut."""
    keep: list[Any] = field(default_factory=list)
    """The cut tensors and consumer nodes, alive so their ids stay unique."""


class _Watch(TorchFunctionMode):
    def __init__(self, cuts: Cuts):
        super().__init__()
        self.cuts = cuts
        self.cut: dict[int, str] = {}  # id(cut tensor) → its site

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = list(hooks.tensors_in((args, kwargs or {})))
        outputs = list(hooks.tensors_in(out))
        with torch._C.DisableTorchFunction():
            sites = [self.cut[id(t)] for t in inputs if id(t) in self.cut]
            for t in outputs:
                if sites and t.grad_fn is not None:
                    known = self.cuts.sites.setdefault(id(t.grad_fn), [])
                    known.extend(s for s in sites if s not in known)
                    self.cuts.keep.append(t.grad_fn)
            live = any(t.requires_grad for t in inputs)
            floats = [t for t in outputs if t.is_floating_point()]
            if live and floats and not any(t.requires_grad for t in outputs):
                if not torch.is_grad_enabled() and in_reentrant_checkpoint() is not None:
                    return out  # its region: the graph is built in the backward, not cut
                name = op_name(func)
                kind = CUT_KINDS.get(name) or (
                    "no_grad region" if not torch.is_grad_enabled() else f"`{name}`"
                )
                line = user_line()
                for t in floats:
                    self.cut[id(t)] = kind + (f" at {line}" if line else "")
                    self.cuts.keep.append(t)
        return out


@contextmanager
def watch() -> Iterator[Cuts]:
    """Note the cuts of the forward run inside this block."""
    cuts = Cuts()
    with _Watch(cuts):
        yield cuts
