"""An optimizer's steps split by the line that called their backward (steps.state_facts.
SideSteps): a lazy regulariser's own backward and step every k steps (StyleGAN's R1 and path
length) is another objective, whose gradient norm is judged against its own steps, not
against the main loss's. No torch."""

from __future__ import annotations

from dataclasses import replace

from gradscope.rules.step_common import Series
from gradscope.steps.records import WatchRun


def parts(run: WatchRun, s: Series) -> list[Series]:
    """`s` itself where every step applied a backward from one line; else its main line's
    steps, then those of each other line, named by it."""
    side = [f for f in run.state_facts.side_steps if f.optimizer == s.index]
    if not side:
        return [s]
    taken: set[int] = set()
    out = []
    for f in side:
        steps = set(f.steps)
        taken |= steps
        name = f"{s.name}: " if s.name else ""
        out.append(
            replace(
                s,
                steps=[r for r in s.steps if r.step in steps],
                name=f"{name}the steps of the backward at {f.site}",
            )
        )
    return [replace(s, steps=[r for r in s.steps if r.step not in taken]), *out]
