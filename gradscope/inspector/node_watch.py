"""gradscope's own backward watched node by node (NodeWatch): which node made the first NaN/Inf
from finite gradients, masked or not; and `readable`, a tensor as one whose values can be
read (a DTensor's local shard), which the live watch of the forward shares."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from gradscope.inspector import backward_nan, hooks


def readable(t: torch.Tensor) -> torch.Tensor | None:
    """`t` as a plain tensor whose values can be read: a DTensor's local shard (no
    collective), None for a meta, sparse or other subclass tensor."""
    to_local = getattr(t, "to_local", None)
    if to_local is not None and type(t) is not torch.Tensor:
        t = to_local()
    if type(t) not in (torch.Tensor, nn.Parameter) or t.is_meta or t.layout != torch.strided:
        return None
    return t


class NodeWatch:
    """Hooks on every node of the loss's graph for gradscope's own backward: the first node,
    in the order the backward ran them, that returned NaN/Inf from finite gradients, whether
    it did so where its incoming gradient was 0 (a masked value), and how many later nodes
    only passed it on (backward_nan.py's words)."""

    def __init__(self, loss: torch.Tensor) -> None:
        self.order: list[tuple[Any, torch.Tensor]] = []
        self.handles = []
        for node in hooks.graph_nodes(loss):
            self.handles.append(node.register_hook(self._hook(node)))

    def _hook(self, node: Any) -> Any:
        def hook(grad_inputs: Any, grad_outputs: Any) -> None:
            # the gradients a node is given come from nodes that ran before it (or the
            # loss's own, finite): the first node to return NaN/Inf made them
            made = _floats(grad_inputs)
            if not made:
                return
            try:
                with torch.no_grad():
                    bad = torch.stack([~torch.isfinite(g).all() for g in made]).any()
                    masked = backward_nan.masked_flag(made, _floats(grad_outputs))
                    flags = torch.stack([bad, masked.to(bad.device)])
            except Exception:  # a gradient the watch cannot read: the backward comes first
                return
            self.order.append((node, flags))

        return hook

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles = []

    def first_bad(self) -> tuple[Any, bool, int] | None:
        """The node that made the first NaN/Inf, whether masked, and the nodes after it."""
        if not self.order:
            return None
        device = self.order[0][1].device
        flags = torch.stack([f.to(device) for _, f in self.order]).cpu().tolist()
        bad = [i for i, (out_bad, _) in enumerate(flags) if out_bad]
        if not bad:
            return None
        return self.order[bad[0]][0], bool(flags[bad[0]][1]), len(bad) - 1


def _floats(grads: Any) -> list[torch.Tensor]:
    """The readable floating-point gradients among a hook's."""
    out = []
    for g in grads:
        if isinstance(g, torch.Tensor) and g.is_floating_point():
            g = readable(g)
            if g is not None:
                out.append(g)
    return out
