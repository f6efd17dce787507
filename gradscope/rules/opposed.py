"""A player's loss that another optimizer ascends: a fairness adversary predicting the
protected attribute from the predictor's output, whose loss the predictor's objective
subtracts (`loss_p - alpha * loss_adv`), or a discriminator's under a minimax generator.
The other player moves this loss's inputs to raise it by design, so its level (a climb as
the predictor learns to hide the attribute) says nothing alone. No torch."""

from __future__ import annotations

from gradscope.steps.meaning import LossKind
from gradscope.steps.records import WatchRun


def ascended_kinds(run: WatchRun, index: int) -> set[str]:
    """The recognised losses optimizer `index` ascends: its terms entered negated, or every
    term under maximize=True (then its negated ones are descended)."""
    kind = run.loss_kind(index)
    if kind is None:
        return set()
    up = not run.maximizes(index)
    return {t.kind for t in kind.terms if t.negated == up}


def opposed(run: WatchRun, index: int, kind: LossKind | None) -> str | None:
    """Why optimizer `index`'s loss says nothing alone when another optimizer ascends a loss
    of the kind this one descends (an adversary's cross-entropy the predictor subtracts);
    None otherwise."""
    if kind is None:
        return None
    mine = {t.kind for t in kind.terms if not t.negated}
    for other in range(len(run.loss_kinds)):
        shared = sorted(mine & ascended_kinds(run, other)) if other != index else []
        if shared:
            name = shared[0].replace("_", "-")
            return (
                f"another optimizer (optimizer {other}) ascends a {name} as this loss "
                "descends one: a player's loss in a game (an adversary whose loss the "
                "predictor subtracts), raised by the other player by design, so its level "
                "says nothing alone"
            )
    return None
