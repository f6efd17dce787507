"""Why a parameter got no gradient: one replay that follows the values computed from it, to
the op that cut the graph or the output the loss never used."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from gradscope.errors import user_line
from gradscope.inspector.replay import (
    CUT_KINDS,
    MAX_SITES,
    SHAPE_ONLY,
    flat_tensors,
    in_reentrant_checkpoint,
    replay,
    site,
)
from gradscope.rules.grads import INDEX_CUT, REENTRANT_CUT, STEP_CUT


@dataclass
class _Flow:
    """Where the values computed from each gradient-less parameter went in one forward."""

    subjects: dict[int, str]
    taint: dict[int, frozenset[str]] = field(default_factory=dict)
    keep: list[Any] = field(default_factory=list)
    used: set[str] = field(default_factory=set)
    cuts: dict[str, list[str]] = field(default_factory=dict)
    soft_cuts: dict[str, list[str]] = field(default_factory=dict)
    dangling: dict[int, tuple[torch.Tensor, frozenset[str], str]] = field(default_factory=dict)
    returned_by: dict[int, str] = field(default_factory=dict)
    indexed: set[int] = field(default_factory=set)
    """Values of an op that also returned integer indices (`topk`): if they dangle, the
    indices are what went on, and the cut there is the cause."""

    def observe(self, name: str, inputs: list[torch.Tensor], out: Any, module: str) -> None:
        marks: frozenset[str] = frozenset()
        for t in inputs:
            marks |= self.taint.get(id(t), frozenset()) or (
                frozenset([self.subjects[id(t)]]) if id(t) in self.subjects else frozenset()
            )
            self.dangling.pop(id(t), None)
        if not marks:
            return
        self.used |= marks
        live = any(t.requires_grad for t in inputs)
        outs = [t for t in flat_tensors(out)]
        carried = [t for t in outs if t.requires_grad]
        if name in SHAPE_ONLY or (live and not outs and name not in CUT_KINDS):
            return  # `.shape`, `zeros_like`, `bool(x > 0)`: no values leave, nothing is cut
        if live and not carried:
            self._cut(name, outs, marks, module)
            return
        line = user_line()
        if live and any(not _differentiable(t) for t in outs):
            # `topk`, `max(dim)`, `sort`: values with a gradient, indices without one; a
            # parameter whose values leave only through the indices is cut here
            self._cut(name, [], marks, module, line)
            self.indexed.update(id(t) for t in carried)
        for t in carried:
            self.taint[id(t)] = marks
            self.keep.append(t)
            self.dangling[id(t)] = (t, marks, site(name, module, line))

    def _cut(
        self,
        name: str,
        outs: list[torch.Tensor],
        marks: frozenset[str],
        module: str,
        line: str | None = None,
    ) -> None:
        checkpoint = in_reentrant_checkpoint() if not torch.is_grad_enabled() else None
        if checkpoint is not None:
            kind = (
                REENTRANT_CUT
                + (f" called at {checkpoint}" if checkpoint else "")
                + " whose inputs do not require grad, so it computes without a graph "
                "(use use_reentrant=False, or make an input require grad)"
            )
            soft = False
        elif not torch.is_grad_enabled():
            kind = f"a torch.no_grad() (or inference_mode) region: {site(name, module)}"
            soft = False
        elif name in CUT_KINDS:
            kind = f"{CUT_KINDS[name]}: {site(name, module)}"
            soft = False
        elif not outs:  # called for the indices of an op that also returned values
            kind = f"{INDEX_CUT}: {site(name, module, line)}"
            soft = True
        elif all(not _differentiable(t) for t in outs):
            kind = f"{STEP_CUT}: {site(name, module, line)}"
            soft = True
        else:
            kind = f"{site(name, module)}: its input requires grad, its output does not"
            soft = False
        for subject in marks:
            sites = (self.soft_cuts if soft else self.cuts).setdefault(subject, [])
            if kind not in sites and len(sites) < MAX_SITES:
                sites.append(kind)

    def post(self, name: str, _m: Any, out: Any) -> None:
        for t in flat_tensors(out):
            if id(t) in self.dangling and name:
                self.returned_by[id(t)] = name  # the outermost module, since post hooks nest

    def unused(self, subject: str) -> list[str]:
        return list(
            dict.fromkeys(
                f"`{self.returned_by[k]}`" if k in self.returned_by else site
                for k, (_, marks, site) in self.dangling.items()
                if subject in marks and k not in self.indexed
            )
        )[:MAX_SITES]


def _differentiable(t: torch.Tensor) -> bool:
    return t.is_floating_point() or t.is_complex()


def graph_causes(model, batch, loss_fn, grad_outputs, subjects: dict[int, str]) -> dict[str, str]:
    """Subject name → why its gradient is None, from one replay that follows its values."""
    flow = _Flow(subjects)
    target = replay(model, batch, loss_fn, grad_outputs, flow.observe, flow.post)
    flow.dangling.pop(id(target), None)
    out = {}
    for subject in subjects.values():
        if flow.cuts.get(subject):
            out[subject] = "graph cut by " + "; ".join(flow.cuts[subject])
        elif flow.unused(subject):
            out[subject] = (
                "computed but not used by the loss: the output of "
                + ", ".join(flow.unused(subject))
                + " never reaches it (nothing is cut; drop it, add it to the loss, or freeze it)"
            )
        elif flow.soft_cuts.get(subject):
            out[subject] = "graph cut by " + "; ".join(flow.soft_cuts[subject])
        elif subject not in flow.used:
            out[subject] = "the parameter is not used in the forward pass, although its module ran"
        else:
            out[subject] = "gradscope could not confirm where its values leave the graph"
    return out
