"""Modules whose output goes unchanged into a per-row normalisation (LayerNorm, RMSNorm).

Such a module's weight, when it is its only parameter (an embedding table read straight into
a LayerNorm, as RWKV's small-init embedding is; a bias-free projection before an RMSNorm), is
scale-invariant: the norm undoes any rescaling of it, so its gradient is ∝ 1/‖w‖ by design
and a tiny init makes it large without anything exploding (rules/by_design.py). Seen by
identity during the forward: the norm's input is the very tensor that module returned last,
not a sum or a copy of it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.nn.modules import module as module_mod

ROW_NORMS = ("LayerNorm", "RMSNorm")
"""Class-name parts of the modules that normalise each position's features as a whole."""


class NormFeeds:
    """The last tensor a module returned, and the modules whose output a norm read as is."""

    def __init__(self) -> None:
        self.last: tuple[torch.nn.Module, torch.Tensor] | None = None
        self.feeding: dict[int, torch.nn.Module] = {}

    def left(self, module: torch.nn.Module, _args: Any, output: Any) -> None:
        if not isinstance(output, torch.Tensor) or torch.compiler.is_compiling():
            return  # nothing traced by torch.compile is kept: its tensors are not the run's
        if self.last is not None and self.last[1] is output:
            return  # a container handing its child's output on: the child made it
        self.last = (module, output)

    def entered(self, module: torch.nn.Module, args: Any) -> None:
        last = self.last
        if last is None or not args or args[0] is not last[1] or torch.compiler.is_compiling():
            return
        if any(part in type(module).__name__ for part in ROW_NORMS):
            self.feeding[id(last[0])] = last[0]

    def names(self, model: torch.nn.Module) -> tuple[str, ...]:
        """The model's modules seen feeding a norm, by their names in it."""
        return tuple(name for name, m in model.named_modules() if id(m) in self.feeding)


@contextmanager
def watching(feeds: NormFeeds | None = None) -> Iterator[NormFeeds]:
    """Two global hooks for the forwards run inside; removed, and the last output let go, after."""
    feeds = feeds if feeds is not None else NormFeeds()
    pre = module_mod.register_module_forward_pre_hook(feeds.entered)
    post = module_mod.register_module_forward_hook(feeds.left)
    try:
        yield feeds
    finally:
        pre.remove()
        post.remove()
        feeds.last = None
