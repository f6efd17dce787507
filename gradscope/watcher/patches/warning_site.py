"""`warnings.warn` while the watch runs: a warning torch raises inside one of the patched
entry points keeps the user's line as its location.

torch warns with `stacklevel=2` (or 3) to point at its caller; a patch puts its own frames
between the caller and torch, so without this the warning would point at
gradscope/watcher/patches/scheduler.py (and the user's filters by module or line would
not match it). The frames of the patches are not counted toward `stacklevel`, as Python
3.12's `skip_file_prefixes` does, and the real `warnings.warn` is called with the
stacklevel that lands on the user's frame: the filters, the once-per-location registry
and `-W error` then act exactly as without gradscope. A warning with no patch frame in its
way is passed on unchanged.
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any

from torch.compiler import is_compiling

import gradscope.untraced as untraced_module
from gradscope.watcher import checkpoint_inputs
from gradscope.watcher.patches.base import Patch
from gradscope.watcher.state import WatchState

PATCHES = os.path.dirname(os.path.abspath(__file__)) + os.sep
UNTRACED = os.path.abspath(untraced_module.__file__)
"""The folder of the patches and the wrapper around each (untraced.py): their frames are
not the user's."""


class WarningSite(Patch):
    name = "warn"

    def __init__(self, state: WatchState) -> None:
        super().__init__(state, warnings)

    traced = True  # a warning inside a graph torch.compile traces is torch's to handle

    def wrap(self, original: Any) -> Any:
        state = self.state

        def warn(
            message: Any, category: Any = None, stacklevel: int = 1, *a: Any, **kw: Any
        ) -> Any:
            if is_compiling():  # traced, or dynamo's own warning while it compiles
                level = stacklevel + 1 if isinstance(stacklevel, int) else stacklevel
                return original(message, category, level, *a, **kw)
            checkpoint_inputs.note(state, message)
            try:
                level = user_level(sys._getframe(1), stacklevel)
            except Exception:  # gradscope's own walk failed: the plain location
                level = stacklevel + 1 if isinstance(stacklevel, int) else stacklevel
            return original(message, category, level, *a, **kw)

        return warn


def user_level(caller: Any, stacklevel: Any) -> Any:
    """The stacklevel, counted from the wrapper's own frame, of the frame `stacklevel`
    asks for once the patches' frames are left out (`caller`: the frame that warned)."""
    if not isinstance(stacklevel, int) or stacklevel < 1:
        return stacklevel + 1 if isinstance(stacklevel, int) else stacklevel
    frame, steps, counted = caller, 0, 1
    while counted < stacklevel and frame is not None:
        frame = frame.f_back
        steps += 1
        while frame is not None and _gradscopes(frame.f_code.co_filename):
            frame = frame.f_back
            steps += 1
        counted += 1
    return steps + 2  # the wrapper's frame is level 1, the caller level 2


def _gradscopes(filename: str) -> bool:
    return filename.startswith(PATCHES) or filename == UNTRACED
