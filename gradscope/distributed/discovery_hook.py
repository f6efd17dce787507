"""The global forward pre-hook that finds the DDP or fully_shard model at its first
forward, run outside dynamo. torch warns that a compiled module fires global hooks once
more; that is this hook (its extra call meets the OptimizedModule, not a DDP root, and is
passed over), so the warning is not the script's to see while the hook is on."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable
from typing import Any

from torch import nn

from gradscope.untraced import untraced

COMPILED_GLOBAL_HOOK = r"Using `torch\.compile\(module\)` when there are global hooks"


class DiscoveryHook:
    """`discover(module, args)` before every module's forward until `remove`."""

    def __init__(self, discover: Callable[[nn.Module, Any], None]) -> None:
        warnings.filterwarnings("ignore", message=COMPILED_GLOBAL_HOOK, category=UserWarning)
        self._filter = warnings.filters[0]
        self._handle = nn.modules.module.register_module_forward_pre_hook(untraced(discover))

    def remove(self) -> None:
        self._handle.remove()
        filters: list[Any] = warnings.filters  # type: ignore[assignment]  # a list, typed as a Sequence
        with contextlib.suppress(ValueError):  # removed already, or by the script
            filters.remove(self._filter)
