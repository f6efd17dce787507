"""Every tensor an optimizer trains got no gradient (None) from one same step to the end,
while the backward still ran each step: the loss reaches other tensors now, ones no
optimizer holds (GS417's advice then says so). Most often a model rebuilt to resume from a
checkpoint while the optimizer keeps the old one's parameters, or new tensors made in place
of these (a densification or re-initialisation that makes new nn.Parameters and leaves the
old ones in the optimizer's param groups). No torch."""

from __future__ import annotations

from gradscope.rules.step_common import Series, finite
from gradscope.steps.records import WatchRun


def all_stopped_at(run: WatchRun, s: Series) -> int | None:
    """The step from which every tensor of the series' optimizer that had gradients got
    None, where the run has one optimizer and the steps after it still read a finite
    loss (a backward ran on something that requires grad); None otherwise."""
    if len(run.optimizers) != 1:
        return None
    since = set()
    for i in s.members:
        had = run.tensors.learned(s.index, i)
        if had is None:
            continue
        if had.since_step < 0 or had.zero_after:
            return None  # still learning, or zeros: the graph still reaches it
        since.add(had.since_step)
    if len(since) != 1:
        return None
    (step,) = since
    after = [r for r in s.live() if r.step >= step]
    return step if after and all(finite(r.loss) for r in after) else None


def advice(step: int) -> str:
    return (
        f"every tensor this optimizer trains got no gradient from step {step} on while the "
        "backward still ran: the loss reaches other tensors, in no optimizer. If the script "
        f"built a new model just before step {step} (a resume: model = Net(); "
        "model.load_state_dict(checkpoint)) and kept the old optimizer, build the optimizer "
        "over the new model before loading its state, or load the checkpoint into the model "
        "the optimizer holds. If it "
        f"made new tensors in place of these just before step {step} (a densification, pruning or "
        "re-initialisation making new nn.Parameters), put the new ones in the optimizer's "
        'param groups (group["params"][i] = new, its state moved over) instead of leaving the '
        "old ones there; otherwise find the detach() or no_grad() that cut the model off"
    )
