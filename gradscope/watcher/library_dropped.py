"""A module that ran with gradients and got none, every module holding it an installed
library's: is its output in what the outermost of them returned? sentence-transformers'
models.Transformer keeps BertModel's last_hidden_state and drops its pooler_output, so
every SentenceTransformer trained on a BERT under mean pooling carries a pooler that runs
and never learns. Nothing the user wrote dropped it. A model whose own output holds it
(BertForSequenceClassification's logits) was given to the script, which dropped it: that
stays a finding to name.

The output must have been passed up first: the innermost library module above the one
holding it returns it (BertPooler's output is BertModel's pooler_output); a layer whose
output a library's forward cuts inside (a detach) stays a finding.

Decided at the first forward with gradients after the optimizer's first step, by one
global forward hook (kept out of the modules, so nothing a script copies or pickles
carries it), removed once every candidate is decided: one walk of the outermost module's
graph, bounded, at that forward, none later."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from gradscope.untraced import untraced
from gradscope.watcher.no_grad_owners import NoGradOwners

CALLS = 1_000_000
"""Module calls the global hook sees before it gives up: the outermost module may never run
again with gradients (its holder called outside it)."""
NODES = 20_000
"""Graph nodes walked from the outermost module's outputs before giving up (undecided)."""
FORWARDS = 8
"""Forwards of the outermost modules with gradients on waited for a candidate's output with
a graph (those without, GradCache's first pass, wait for nothing)."""


class LibraryDropped:
    def __init__(self, on_fault: Callable[[str, BaseException], None]) -> None:
        self.on_fault = on_fault
        self.pending: dict[int, tuple[int, int, int]] = {}
        """Tracked position → ids of the module holding it, of the innermost library module
        above it, of the outermost module."""
        self.seen: dict[int, Any] = {}
        """Id of a holding module → its last output's grad_fn."""
        self.dropped: dict[int, str] = {}
        """Tracked position → the outermost library class whose output left it out."""
        self.names: dict[int, str] = {}
        self.passed: set[int] = set()
        """Positions whose module's output the innermost library module above it returned
        (BertPooler's, BertModel's pooler_output): passed up, not cut inside a layer."""
        self.waited = 0
        self.calls = 0
        self._handle: Any = None

    def watch(self, owners: NoGradOwners) -> None:
        """At an optimizer's first step, after `owners` hooked its chains: the positions
        whose chain holds a library's class below the outermost module and none of the
        script's own."""
        for position, chain in owners.chains.items():
            if position in self.pending or position in self.dropped:
                continue
            below = [m for m in chain[1:-1] if m in owners.library]
            if below and not any(m in owners.own for m in chain):
                self.pending[position] = (chain[0], below[0], chain[-1])
                self.names[position] = owners.library.get(chain[-1], owners.library[below[-1]])
        if self.pending and self._handle is None:
            self._handle = nn.modules.module.register_module_forward_hook(untraced(self._forward))

    def dropped_in(self, position: int) -> str:
        return self.dropped.get(position, "")

    def remove(self) -> None:
        self.seen.clear()  # its nodes hold a step's graph
        if self._handle is not None:
            self._handle.remove()
            self._handle = None

    def _forward(self, module: nn.Module, _args: Any, output: Any) -> None:
        try:
            self._note(id(module), output)
        except Exception as exc:  # gradscope's own: this probe stops, the watch goes on
            self.pending.clear()
            self.remove()
            self.on_fault("the library-dropped hook", exc)

    def _note(self, module: int, output: Any) -> None:
        self.calls += 1
        if self.calls > CALLS:
            self.pending.clear()
            self.remove()
            return
        if module in {h for h, _, _ in self.pending.values()} and _graph(output):
            self.seen[module] = output.grad_fn
        ups = {p: h for p, (h, u, _) in self.pending.items() if u == module and h in self.seen}
        if ups and (reached := _reached(output, {self.seen[h] for h in ups.values()})):
            self.passed.update(p for p, h in ups.items() if self.seen[h] in reached)
        if module not in {r for _, _, r in self.pending.values()}:
            return
        asked = {p: h for p, (h, _, r) in self.pending.items() if r == module and h in self.seen}
        reached = _reached(output, {self.seen[h] for h in asked.values()}) if asked else None
        for position, holder in asked.items():
            if position in self.passed and reached is not None and self.seen[holder] not in reached:
                self.dropped[position] = self.names[position]
            del self.pending[position]
        for holder in asked.values():
            self.seen.pop(holder, None)
        self.waited += torch.is_grad_enabled()
        if not self.pending or self.waited >= FORWARDS:
            self.pending.clear()
            self.remove()


def _graph(output: Any) -> bool:
    return isinstance(output, torch.Tensor) and output.grad_fn is not None


def _reached(output: Any, wanted: set[Any]) -> set[Any] | None:
    """The nodes of `wanted` the graph of `output`'s tensors reaches; None: too large a graph
    to tell."""
    stack = [t.grad_fn for t in _tensors(output) if t.grad_fn is not None]
    visited: set[Any] = set()
    while stack:
        node = stack.pop()
        if node in visited:
            continue
        visited.add(node)
        if len(visited) > NODES:
            return None
        stack.extend(n for n, _ in node.next_functions if n is not None)
    return wanted & visited


def _tensors(output: Any) -> list[torch.Tensor]:
    """The tensors of a module's output: a tensor, a tuple, a dict or a ModelOutput."""
    if isinstance(output, torch.Tensor):
        return [output]
    if isinstance(output, dict):
        output = list(output.values())
    if isinstance(output, list | tuple):
        return [t for item in output for t in _tensors(item)]
    return []
