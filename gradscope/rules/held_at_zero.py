"""GS411 explains GS413: a factor that started at exactly 0 and that no optimizer steps
(a tanh gate initialised at 0, as Flamingo's gated cross-attention, left out of the
optimizer) stays 0, so whatever it multiplies gets only zero gradients and never learns.
Fixing the gate's place in the optimizer fixes them too. No torch."""

from __future__ import annotations

from gradscope.rules.step_common import values_changed
from gradscope.rules.zero_start import started_at_zero
from gradscope.steps.records import WatchRun


def held_at_zero(run: WatchRun, outside: str, never: str) -> bool:
    """`outside` (a parameter in no optimizer) started at 0 and never moved, and `never`
    got gradients that were all zeros (not None: it is in the graph, behind a zero)."""
    by_name = {p.name: i for i, p in enumerate(run.params)}
    gate, held = by_name.get(outside), by_name.get(never)
    if gate is None or held is None:
        return False
    g = run.params[gate]
    return started_at_zero(g) and values_changed(g) is False and run.tensors.ever_had_grad(held)
