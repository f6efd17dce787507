"""GS411's information for a parameter outside every optimizer whose values the script
moves itself (an inner loop's weights written back, a Hebbian rule by hand): no optimizer
was meant to step it. No torch."""

from __future__ import annotations

from dataclasses import replace

from gradscope.findings import RULES, Finding, Severity
from gradscope.fmt import num
from gradscope.rules.step_common import values_changed
from gradscope.steps.records import ParamInfo, WatchRun


def moved(p: ParamInfo, piled: tuple[str, ...]) -> bool:
    """Its values changed with no optimizer holding it: the script's own update. Not where
    an optimizer held it before a swap (that optimizer moved it) and its gradients piled up
    since: the loss still reads the old tensor, the error."""
    return bool(values_changed(p)) and not (piled and p.replaced_after is not None)


def finding(run: WatchRun, p: ParamInfo, piled: tuple[str, ...]) -> Finding:
    """Information: outside every optimizer, given gradients, not a copy of a trained
    parameter, and its values changed: the script moves it itself (an inner loop's weights
    written back after a meta-step, an update by hand such as a Hebbian rule's), so no
    optimizer was meant to step it. Gradients that pile up are read by nothing: its own
    update does not use them, and adding it to an optimizer would change its rule."""
    moved = (
        f"{p.name} gets gradients but is in no optimizer param group; its values changed "
        f"(norm {num(p.weight_norm)} at the first step, {num(p.last_norm)} at the end)"
    )
    if piled:
        message = (
            f"{moved} while its gradient piled up unread: the script moves it itself with an "
            "update that does not read these gradients (a Hebbian or other local rule by hand)"
        )
        advice = (
            "nothing to fix in its own update; requires_grad_(False) on it (or a .detach() "
            "where the loss reaches it) stops the backward computing gradients nothing reads; "
            "adding it to an optimizer would change its learning rule"
        )
    else:
        message = (
            f"{moved} and its gradient did not pile up: the script moves it itself (an inner "
            "loop's weights written back, an update by hand)"
        )
        advice = (
            "nothing to fix if its own update is meant; if that update does not read these "
            "gradients, a .detach() where the loss reaches it saves their backward"
        )
    finding = RULES["GS411"].finding(
        p.name, message, advice, evidence=(f"optimizers: {', '.join(run.optimizers)}", *piled)
    )
    return replace(finding, severity=Severity.INFO)
