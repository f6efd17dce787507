"""One torch entry point replaced while installed, and put back by `remove`."""

from __future__ import annotations

from typing import Any

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
        setattr(self.owner, self.name, wrapped if self.traced else untraced(wrapped))

    def remove(self) -> None:
        if self.original is not None:
            setattr(self.owner, self.name, self.original)
            self.original = None
