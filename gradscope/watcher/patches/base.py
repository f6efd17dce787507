"""One torch entry point replaced while installed, and put back by `remove`."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from types import CodeType
from typing import Any

from torch.compiler import is_compiling

from gradscope.watcher.state import WatchState


def untraced(hook: Callable[..., Any]) -> Callable[..., Any]:
    """`hook` run eagerly where torch.compile traces it (a training step compiled
    whole: its backward, clip, step and zero_grad): the graph breaks there, as it does
    at torch's own `zero_grad`. Traced, gradscope's bookkeeping would guard the graph
    on its counters (a recompilation every step, then eager code at dynamo's limit)
    and dynamo's warnings about it would reach the user's stderr."""

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


class Patch:
    """Replaces `owner.<name>` with `wrap(original)`; a name the owner lacks (an older
    torch) is left alone."""

    name = ""
    traced = False  # True: left inside a graph torch.compile traces (the logits' probes)

    def __init__(self, state: WatchState, owner: Any) -> None:
        self.state = state
        self.owner = owner
        self.original: Any = None

    def wrap(self, original: Any) -> Any:
        raise NotImplementedError

    def install(self) -> None:
        original = vars(self.owner).get(self.name)
        if original is None:
            return
        self.original = original
        wrapped = self.wrap(original)
        setattr(self.owner, self.name, wrapped if self.traced else untraced(wrapped))

    def remove(self) -> None:
        if self.original is not None:
            setattr(self.owner, self.name, self.original)
            self.original = None
