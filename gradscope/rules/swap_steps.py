"""Steps right after an optimizer's tensors were swapped for new ones (3D Gaussian
splatting's densification and pruning: every group holds new, more or fewer points): the
total gradient norm there is taken over other tensors than the steps before it, so a jump
against their median is the new set's, not a bad batch's. No torch."""

from __future__ import annotations

from collections.abc import Iterable

from gradscope.steps.records import WatchRun


def swaps(run: WatchRun) -> set[int]:
    """The steps after which an optimizer let go of tensors it took new ones for."""
    return {p.replaced_after for p in run.params if p.replaced_after is not None}


def after_swap(run: WatchRun, steps: Iterable[int]) -> int | None:
    """The swap every one of these steps follows within two steps (the step on the new
    tensors, and the first that read their gradients where they were made after the
    backward); None where one does not."""
    done = swaps(run)
    if not done:
        return None
    found = set()
    for step in steps:
        near = [k for k in done if 0 < step - k <= 2]
        if not near:
            return None
        found.add(max(near))
    return max(found) if found else None
