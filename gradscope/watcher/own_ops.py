"""gradscope's own measurements inside the script's forward, run outside the script's
torch dispatch modes. Selective activation checkpointing
(`create_selective_checkpoint_contexts`) caches the outputs of the ops its policy saves,
in order, and hands them back in that order at the recompute: one matmul of ours among
them shifts every later one, and the script's backward fails on a shape it never made.
A FlopCounterMode or a logging mode would count ours as the model's too. Costs one
stack-length read where no mode is active."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch


def outside_modes() -> AbstractContextManager[Any]:
    """The script's dispatch modes set aside while gradscope computes, put back after."""
    if not torch._C._len_torch_dispatch_stack():
        return nullcontext()
    try:
        from torch.utils._python_dispatch import _disable_current_modes
    except ImportError:  # a torch without it: measured under the modes, as before
        return nullcontext()
    return _disable_current_modes()
