"""Copies of a trained model kept outside every optimizer (RL's target critic, a momentum
encoder made by deepcopy) are not among the run's parameters; moving_copies.py still sees
them run forward without gradients and reads whether they ever changed. GS475 takes them as
its frozen copy: SAC's or DrQ's Polyak update with its arguments swapped writes the critic
toward a target that never moves. No torch."""

from __future__ import annotations

from gradscope.steps.records import WatchRun


def still_untracked(
    run: WatchRun, trained: set[int], moved: set[int]
) -> dict[str, tuple[str, int]]:
    """Trained model → (the name of an untracked copy of it, its trained tensors) where the
    script wrote every one of them (two at least) in place at every interval, and its copies
    ran without gradients and never changed (CoTTA's source copy stays still beside an EMA
    teacher that follows the student: a copy that moved clears the model)."""
    out: dict[str, tuple[str, int]] = {}
    moving = {model for _, model, _, changed in run.state_facts.copy_states if changed}
    for copy, model, at, _ in run.state_facts.copy_states:
        own = [i for i in at if i in trained]
        if model not in moving and len(own) >= 2 and all(i in moved for i in own):
            out.setdefault(model, (copy, len(own)))
    return out
