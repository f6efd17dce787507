"""One torch entry point replaced while installed, and put back by `remove`."""

from __future__ import annotations

import inspect
from typing import Any

from torch.jit import _builtins

from gradscope.untraced import untraced
from gradscope.watcher.state import WatchState


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
        installed = wrapped if self.traced else untraced(wrapped)
        scripted_as(installed, original)
        setattr(self.owner, self.name, installed)

    def remove(self) -> None:
        if self.original is not None:
            unscripted(vars(self.owner).get(self.name))
            setattr(self.owner, self.name, self.original)
            self.original = None


def scripted_as(installed: Any, original: Any) -> None:
    """TorchScript compiles what scripted code calls (`torch.jit.script` of a model whose
    forward calls F.softmax): the patch compiles as the original, a torch op (an entry in
    TorchScript's table of builtins) or a Python function (`__prepare_scriptable__`).
    Compiled, our wrapper (its *args) stopped the script with NotSupportedError."""
    try:
        op = _builtins._find_builtin(original)
        if op is not None:
            _builtins._register_builtin(installed, op)
        elif inspect.isfunction(original):
            installed.__prepare_scriptable__ = lambda: original
    except Exception:  # TorchScript's private table changed: scripting is as before
        return


def unscripted(installed: Any) -> None:
    """The patch's entry out of TorchScript's table (its id may be another object's later)."""
    try:
        _builtins._get_builtin_table().pop(id(installed), None)
    except Exception:
        return
