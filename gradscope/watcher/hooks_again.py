"""Gradient hooks registered on a tensor that already holds a live hook of the same
function: each backward passes the gradient through every one of them in turn. A DEQ's
implicit-backward hook (it replaces the gradient by the solution of the adjoint fixed point)
registered again on a tensor that kept the last one solves twice, and the gradient it
passes on is that of another equation; a scaling hook compounds. Registered again each step
on a persistent tensor, the hooks pile up. Only hooks of the user's own code are read
(`Tensor.register_hook` is wrapped in patches/register_hook.py)."""

from __future__ import annotations

from typing import Any

from gradscope.errors import is_user_file, user_line
from gradscope.steps.records import HookAgain

KEPT_STEPS = 8
"""Steps at which a hook was registered again, kept at most."""


class HooksAgain:
    """The first registration seen again, its site, and the steps it was seen at."""

    def __init__(self) -> None:
        self.found: HookAgain | None = None

    def note(self, tensor: Any, hook: Any, step: int) -> None:
        """`hook` is about to be registered on `tensor` at `step` (steps done + 1)."""
        code = getattr(hook, "__code__", None)
        live = getattr(tensor, "_backward_hooks", None)
        if code is None or not live or not is_user_file(code.co_filename):
            return
        same = sum(1 for h in live.values() if getattr(h, "__code__", None) is code)
        if not same:
            return
        if self.found is None:
            self.found = HookAgain(step, user_line() or "?", code.co_name, same + 1, (step,))
            return
        steps = self.found.steps
        if steps[-1] != step and len(steps) < KEPT_STEPS:
            steps = (*steps, step)
        most = max(self.found.most, same + 1)
        self.found = HookAgain(self.found.step, self.found.site, self.found.hook, most, steps)
