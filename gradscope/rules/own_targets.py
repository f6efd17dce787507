"""A model trained on its own predictions: it ran forward without gradients at most of its
steps (an agent choosing its actions, a TD target or a pseudo-label made by the model it
trains). Its batches and targets come from what it predicts, so they move as it learns, and
the loss can rise while it improves (a DQN's first rewards enter its replay). No torch."""

from __future__ import annotations

from gradscope.steps.records import WatchRun


def own_predictions(run: WatchRun) -> str | None:
    """Why the loss's level says nothing alone when the trained model ran forward without
    gradients at half of the run's optimizer steps or more (an evaluation every few steps
    does not); None otherwise."""
    taken = len(run.steps)
    seen = run.state_facts.no_grad_steps
    if taken < 2 or 2 * seen < taken:
        return None
    return (
        f"the trained model ran forward without gradients at {seen} of the run's {taken} "
        "optimizer steps (an agent choosing its actions, a target or pseudo-label made from "
        "its own predictions): its batches and targets move as it learns, so the loss's "
        "level says nothing alone"
    )
