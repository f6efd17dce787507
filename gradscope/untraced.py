"""gradscope's hooks where torch.compile meets them: run eagerly, never traced.

Traced, gradscope's bookkeeping would guard the graph on its counters (a recompilation
every step, then eager code once dynamo's limit is hit), and dynamo's warnings about it
would reach the user's stderr. Costs nothing without torch.compile: one flag read."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from types import CodeType
from typing import Any

from torch.compiler import is_compiling


def untraced(hook: Callable[..., Any]) -> Callable[..., Any]:
    """`hook` run eagerly where torch.compile traces it (a training step compiled
    whole: its backward, clip, step and zero_grad; a compiled DDP model's own hooks):
    the graph breaks there, as it does at torch's own `zero_grad`."""

    @wraps(hook)
    def call(*args: Any, **kwargs: Any) -> Any:
        if is_compiling():  # inlined where dynamo traces (it is imported): break there
            return sys.modules["torch._dynamo"].disable(hook)(*args, **kwargs)
        return hook(*args, **kwargs)

    return call


def _never_compiled(code: CodeType) -> None:
    """Where dynamo meets `code` as a frame of its own (called from code it gave up
    tracing), it runs it and every frame under it as they are. The hook is torch's
    private one: an older torch goes without (the inlined case above still breaks)."""
    try:
        from torch._C._dynamo import eval_frame
    except ImportError:
        return
    mark = getattr(eval_frame, "set_code_exec_strategy", None)
    action, strategy = (
        getattr(eval_frame, n, None) for n in ("_FrameAction", "_FrameExecStrategy")
    )
    if mark is not None and action is not None and strategy is not None:
        mark(code, strategy(action.SKIP, action.SKIP))


_never_compiled(next(c for c in untraced.__code__.co_consts if isinstance(c, CodeType)))
