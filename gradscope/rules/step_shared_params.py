"""A tensor two optimizers both step (GS456): each applies the gradient of the loss its
own backward ran on, with its own state. A GAN's discriminator optimizer built over the
generator's parameters too, with the fake not detached, moves the generator toward the
discriminator's loss at every discriminator step. Read off the optimizers' param groups
and the gradients each found at its steps: no threshold decides it. An optimizer that
replaced another (a new one each epoch) stepped after it, never between its steps, and
a tensor whose gradient was None at one optimizer's steps (toggled off, or reset before
them) is not moved by it. No torch."""

from __future__ import annotations

from gradscope.config import Thresholds
from gradscope.findings import Finding, Rule, Severity
from gradscope.rules.registry import DECLARED, Stage, rule
from gradscope.rules.step_common import by_optimizer
from gradscope.steps.records import WatchRun, common_module


def _span(run: WatchRun, index: int) -> tuple[int, int] | None:
    """The first and last live step of optimizer `index` (None: it never stepped)."""
    for s in by_optimizer(run):
        if s.index == index and not s.manual(run):
            steps = s.live()
            return (steps[0].step, steps[-1].step) if steps else None
    return None


def _moved(run: WatchRun, index: int, i: int) -> bool:
    """Tensor i had a gradient at more than half of optimizer `index`'s live steps."""
    learned = run.tensors.learned(index, i)
    return learned is not None and 2 * learned.had > run.tensors.live_steps(index)


def _pairs(run: WatchRun) -> list[tuple[int, int, list[int]]]:
    """(a, b, tensors) for each pair of optimizers stepping at the same time that both
    moved the same tensors."""
    spans = {k: _span(run, k) for k in range(len(run.members))}
    out = []
    for a in range(len(run.members)):
        for b in range(a + 1, len(run.members)):
            sa, sb = spans[a], spans[b]
            if sa is None or sb is None or max(sa[0], sb[0]) > min(sa[1], sb[1]):
                continue  # one ran after the other: a replacement, not a second stepper
            both = sorted(set(run.members_of(a)) & set(run.members_of(b)))
            moved = [i for i in both if _moved(run, a, i) and _moved(run, b, i)]
            if moved:
                out.append((a, b, moved))
    return out


@rule(
    "GS456",
    "stepped-by-two",
    Severity.WARNING,
    "shared-params",
    Stage.WATCH,
    "watch: two optimizers stepping in the same run both update the same parameters, each "
    "with the gradient of its own loss",
    example="a GAN whose discriminator optimizer is Adam(list(D.parameters()) + "
    "list(G.parameters())) and whose D loss sees G(z) not detached: every D step moves G "
    "toward the discriminator's loss",
    fix="give each optimizer only its own model's parameters; detach what one model hands "
    "the other where the other's loss should not reach it",
    objectives=(
        "any: the optimizers' param groups and which tensors had a gradient at each one's "
        "steps, a mechanism independent of what the loss means"
    ),
)
def stepped_by_two(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """Two optimizers whose live steps interleave (neither stopped before the other began)
    hold the same tensors in their param groups, and each found a gradient on them at more
    than half of its steps: both update them, each along the gradient of the loss its own
    backward ran on and with its own state (moments, lr), so one optimizer's loss pulls
    them where the other's does not want them (a GAN's discriminator optimizer moving the
    generator to help the discriminator). A tensor whose gradient was None at one
    optimizer's steps (Lightning's toggle_optimizer froze it, or a reset came first) is not
    moved by that one; an optimizer built anew each epoch replaces the last."""
    out = []
    for a, b, moved in _pairs(run):
        names = [run.params[i].name for i in moved]
        owner = common_module(names) or names[0]
        la, lb = run.optimizer_label(a), run.optimizer_label(b)
        out.append(
            this.finding(
                owner,
                f"{len(moved)} tensor(s) of {owner} are in the param groups of both "
                f"{la} and {lb}, and each found a gradient on them at its steps: both "
                "update them, each along its own loss's gradient with its own state",
                "give each optimizer only its own model's parameters (a discriminator's "
                "optimizer over D.parameters() alone); detach what one model hands the "
                "other where the other's loss should not reach it",
                evidence=("tensors: " + ", ".join(names[:6]) + (" …" if len(names) > 6 else ""),),
            )
        )
    return out
