"""`torch.jit.script` and `torch.jit.trace` of a watched model (an export mid-training):
TorchScript compiles every forward hook a module holds, and gradscope's (the evaluation
passes', the noise scale's) are Python it cannot compile, so scripting stopped the run.
While TorchScript makes a module, those hooks are out of every module it reads and put
back, in their order, when it is done: the ScriptModule carries the script's own hooks
only, as a copy of the model does (pickling.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import wraps
from typing import Any

import torch
from torch import nn

from gradscope.watcher.patches.base import Patch
from gradscope.watcher.state import WatchState

HOOK_TABLES = ("_forward_pre_hooks", "_forward_hooks")


@contextmanager
def hooks_hidden(root: nn.Module, own: frozenset[int]) -> Iterator[None]:
    """`own` hook ids out of `root`'s modules for the block; hooks the block adds stay."""
    hidden: list[tuple[dict[int, Any], dict[int, Any]]] = []
    if own:
        for module in root.modules():
            for table_name in HOOK_TABLES:
                table = getattr(module, table_name, None)
                if table and any(k in own for k in table):
                    hidden.append((table, dict(table)))
                    for key in [k for k in table if k in own]:
                        del table[key]
    try:
        yield
    finally:
        for table, before in hidden:
            added = {k: v for k, v in table.items() if k not in before}
            table.clear()
            table.update(before)
            table.update(added)


class ScriptModuleMade(Patch):
    """`torch.jit._recursive.create_script_module`: where both `torch.jit.script` and
    `torch.jit.trace` turn a module into a ScriptModule, its hooks compiled with it."""

    name = "create_script_module"

    def __init__(self, state: WatchState) -> None:
        super().__init__(state, torch.jit._recursive)

    def wrap(self, original: Any) -> Any:
        state = self.state

        @wraps(original)
        def create_script_module(nn_module: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                own = state.noise.module_hook_ids() | state.eval_passes.module_hook_ids()
            except Exception as exc:  # gradscope's own failure: the script scripts as it would
                state.failed("the TorchScript hook", exc)
                own = frozenset()
            if not isinstance(nn_module, nn.Module):
                return original(nn_module, *args, **kwargs)
            with hooks_hidden(nn_module, own):
                return original(nn_module, *args, **kwargs)

        return create_script_module
