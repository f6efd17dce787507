"""The line of the script that called backward for each optimizer step: an optimizer whose
steps come from two lines steps on two objectives (StyleGAN's lazy regularisers, R1 and the
path length, given their own backward and step every k steps). The steps of each line other
than its most common one are kept (steps.state_facts.SideSteps), so a rule compares a step
with steps of its own objective."""

from __future__ import annotations

import functools
import sys
from array import array
from collections import Counter

from gradscope.errors import is_own_file, short_path
from gradscope.steps.state_facts import SideSteps

Site = tuple[str, int]


def site() -> Site:
    """The line of the script's code that called backward (gradscope's frames skipped)."""
    frame = sys._getframe(1)
    while frame.f_back is not None and _own(frame.f_code.co_filename):
        frame = frame.f_back
    return frame.f_code.co_filename, frame.f_lineno


@functools.lru_cache(maxsize=256)
def _own(filename: str) -> bool:
    return is_own_file(filename)


class BackwardSites:
    """Per optimizer, the steps of each line that called the backward they apply."""

    def __init__(self) -> None:
        self._steps: dict[int, dict[Site, array[int]]] = {}

    def note(self, optimizer: int, step: int, at: Site | None) -> None:
        if at is not None:
            lines = self._steps.setdefault(optimizer, {})
            lines.setdefault(at, array("q")).append(step)

    def facts(self) -> tuple[SideSteps, ...]:
        """The steps of every line but the most common one, of each optimizer with two."""
        out = []
        for optimizer, lines in sorted(self._steps.items()):
            if len(lines) < 2:
                continue
            counts = Counter({at: len(steps) for at, steps in lines.items()})
            main = counts.most_common(1)[0][0]
            out += [
                SideSteps(optimizer, f"{short_path(at[0])}:{at[1]}", tuple(steps))
                for at, steps in lines.items()
                if at != main
            ]
        return tuple(out)
