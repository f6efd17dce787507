"""A model trained on its own predictions: it ran forward without gradients at most of its
steps (an agent choosing its actions, a TD target or a pseudo-label made by the model it
trains), or a copy of it that the script moves ran so (an EMA teacher: DINO, BYOL, Mean
Teacher). Its batches and targets come from what it predicts, so they move as it learns, and
the loss can rise while it improves (a DQN's first rewards enter its replay; DINO's
cross-entropy as the teacher's centred targets spread out). No torch."""

from __future__ import annotations

from collections import Counter

from gradscope.steps.records import WatchRun


def own_predictions(run: WatchRun) -> str | None:
    """Why the loss's level says nothing alone when the trained model ran forward without
    gradients at half of the run's iterations or more (an evaluation every few steps does
    not), or a copy of it that moved between its forwards did; None otherwise. The
    iterations are the steps of the optimizer that stepped most: SAC's critics, actor and
    temperature each step once per iteration, around one action."""
    taken = max(Counter(r.optimizer for r in run.steps).values(), default=0)
    seen, copied = run.state_facts.no_grad_steps, run.state_facts.copy_steps
    if taken < 2:
        return None
    if 2 * seen >= taken:
        of = (
            f"the {taken} steps of its busiest optimizer"
            if len({r.optimizer for r in run.steps}) > 1
            else f"the run's {taken} optimizer steps"
        )
        return (
            f"the trained model ran forward without gradients at {min(seen, taken)} of {of} "
            "(an agent choosing its actions, a target or pseudo-label made "
            "from its own predictions): its batches and targets move as it learns, so the "
            "loss's level says nothing alone"
        )
    if 2 * copied >= taken:
        return (
            "a copy of the trained model that the script moves between steps (an EMA "
            f"teacher, a synced target network) ran forward without gradients at {copied} "
            f"of the run's {taken} optimizer steps: the targets it makes move as the model "
            "learns, so the loss's level says nothing alone"
        )
    return None
