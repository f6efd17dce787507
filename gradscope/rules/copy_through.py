"""GS411's information for a copy of a trained model (a target critic) that the loss
differentiates through to the network an optimizer steps: the value of the state at the
end of a differentiable rollout (SHAC's terminal value), the state computed by the actor.
The gradient through the copy is the method's; the one the backward leaves in the copy's
own `.grad` is a by-product no step applies. Cutting the copy's output (torch.no_grad(),
.detach()) would cut the actor's gradient too: freezing its weights is the fix that keeps
it (watcher/copies_through.py). No torch."""

from __future__ import annotations

from dataclasses import replace

from gradscope.findings import RULES, Finding, Severity
from gradscope.steps.records import WatchRun


def through(run: WatchRun, i: int) -> bool:
    """Parameter `i` belongs to a copy whose forward with gradients on was fed a trained
    network's output."""
    return i in run.state_facts.through_copies


def finding(run: WatchRun, name: str, copy: str, piled: tuple[str, ...]) -> Finding:
    """Information: a copy differentiated through by design, its weights left trainable."""
    made = RULES["GS411"].finding(
        name,
        f"{name} gets gradients but is in no optimizer param group: it looks like a copy of "
        f"{copy} (a target network) that the loss differentiates through to a network an "
        "optimizer steps (its input is computed by that network, as a value bootstrapped at "
        "the end of a differentiable rollout is); the gradient through it is the method's, "
        "and what the backward adds to its own .grad is a by-product no step applies",
        "nothing to fix in the method; freeze the copy's weights with requires_grad_(False) "
        "so that the backward stops computing them (the gradient still flows through it to "
        "its input); do not compute it under torch.no_grad() or .detach() its output, which "
        "would cut that gradient too, nor add it to an optimizer",
        evidence=(
            f"optimizers: {', '.join(run.optimizers)}",
            "a forward of the copy with gradients on was fed a tensor whose graph reaches "
            "parameters an optimizer holds",
            *piled,
        ),
    )
    return replace(made, severity=Severity.INFO)
