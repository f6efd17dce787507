"""GS413 on tensors that each had an optimizer of their own for one step, got no gradient
there, and were never stepped again while other optimizers went on stepping: a value kept
in a parameter store and replaced at every step (Pyro's decaying-average baseline writes its
running average into the param store under no_grad), which a per-parameter optimizer
wrapper (pyro.optim) hands to a new optimizer each time it meets a new tensor. The step did
nothing (a tensor with no gradient is skipped) and nothing was meant to train it:
information, told once for them all. A weight the loss never reads keeps its tensor, and
its optimizer steps it at every step: still the warning. No torch."""

from __future__ import annotations

from dataclasses import replace

from gradscope.findings import Finding, Severity
from gradscope.steps.records import WatchRun


def built_for_one_step(run: WatchRun, i: int) -> bool:
    """Every optimizer holding tensor i holds it alone and stepped once, while another
    optimizer stepped more than once: the run went on, with tensors that were kept."""
    holders = [k for k in range(len(run.members)) if i in run.members_of(k)]
    if not holders or any(run.members_of(k) != (i,) for k in holders):
        return False
    if sum(len(run.store.of_optimizer(k)) for k in holders) != 1:
        return False
    others = (k for k in range(len(run.members)) if k not in holders)
    return any(len(run.store.of_optimizer(k)) > 1 for k in others)


def told_once(findings: list[Finding], names: list[str]) -> list[Finding]:
    """The GS413 findings of `names` (tensors built for one step) as one finding at info."""
    mine = [f for f in findings if f.subject in names]
    if not mine:
        return findings
    first = mine[0]
    more = f" and {len(mine) - 1} more tensor(s) like it" if len(mine) > 1 else ""
    told = replace(
        first,
        severity=Severity.INFO,
        message=f"{first.subject}{more} each got no gradient (None) at the one step of an "
        "optimizer built for it, and no step held it again while the run went on: a value "
        "replaced at every step in a parameter store (Pyro's decaying-average baseline "
        "keeps its running average there), handed by a per-parameter optimizer wrapper to "
        "a new optimizer each time; its step did nothing",
        advice="nothing to do: no gradient was meant to reach it; if it is a parameter you "
        "meant to train, create it once (pyro.param returns the stored tensor) and make the "
        "loss read it",
        evidence=(
            f"tensors: {', '.join(f.subject for f in mine[:6])}" + (" …" if len(mine) > 6 else ""),
        ),
    )
    return [told if f is first else f for f in findings if f is first or f not in mine]
