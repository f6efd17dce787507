"""GS411's information for a parameter whose optimizer the script dropped before it ever
stepped: zeroed, a backward reached its model, then no step, and by the run's end that
optimizer was gone while others trained on. A training abandoned at its first step (a
search's trial that raised after its first backward and before its step: out of memory, a
loss not finite, a pruning check, caught by `study.optimize(catch=...)`), not a step
forgotten (a forgotten step leaves the optimizer in use, its zero_grad() running). No
torch."""

from __future__ import annotations

from dataclasses import replace

from gradscope.findings import RULES, Finding, Severity
from gradscope.steps.records import ParamInfo, WatchRun


def dropped(p: ParamInfo) -> bool:
    """Held by an optimizer that was zeroed, never stepped, and is gone: the watcher counts
    no zero_grad for one the script dropped (a live one that was zeroed counts one or
    more)."""
    return bool(p.idle_optimizer) and p.idle_zeroed and p.idle_resets == 0


def finding(run: WatchRun, p: ParamInfo) -> Finding:
    message = (
        f"{p.name} got gradients, and the optimizer holding it ({p.idle_optimizer}) was "
        "dropped by the script before it ever stepped, while other optimizers trained on: "
        "a training abandoned at its first step (a trial that raised after its backward)"
    )
    advice = (
        "nothing to fix if that trial was meant to end there (caught, pruned); if every "
        "trial should train, look at what its first step raised"
    )
    found = RULES["GS411"].finding(
        p.name, message, advice, evidence=(f"optimizers that stepped: {', '.join(run.optimizers)}",)
    )
    return replace(found, severity=Severity.INFO)
