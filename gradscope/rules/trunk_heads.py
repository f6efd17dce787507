"""Two optimizers over one trunk, each loss training a head of its own (GS456's exception):
SAC-AE and CURL hand the critic's Adam the whole critic, conv encoder included, and give the
encoder a second Adam for the auxiliary loss (reconstruction, contrastive) whose decoder or
bilinear W steps with it. Each backward's gradients are all stepped, the trunk's by both;
that is two objectives shaping one representation, not a tensor one optimizer should not
hold. So are two players of one game over a shared trunk (USAD's two autoencoders over one
encoder): each loss also reaches the other's own head and leaves that gradient to the other
optimizer, whose loss reaches this one's head in turn. DARTS's alphas in the weights' SGD
stay named: the validation backward that their own Adam steps leaves the weights' gradients
unstepped, and that Adam holds nothing of its own; so does an actor's optimizer holding the
encoder, its loss reaching a critic whose loss never reaches the actor. No torch."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from gradscope.rules.step_common import Series
from gradscope.steps.records import WatchRun
from gradscope.steps.step_record import StepRecord


@dataclass(frozen=True)
class Backward:
    """One backward and the optimizer steps that followed it before the next."""

    number: int
    fed: frozenset[int] | None
    """Tensors it gave a gradient; None where the steps kept no per-tensor norms."""
    stepped: frozenset[int]
    """Tensors the optimizers stepping after it hold."""


def trains_own_heads(run: WatchRun, a: Series, b: Series, shared: Sequence[int]) -> bool:
    """Most steps of each optimizer follow a backward that also fed tensors outside the
    shared ones (its loss's own head) and whose every fed tensor was stepped after it, by
    this optimizer or one stepping on the same backward; and the two never step on the same
    backward (that would be one gradient applied twice, not two losses)."""
    of_step = _backwards(run)
    if _shared_backwards(of_step, a, b):
        return False
    keep = set(shared)
    own_a = frozenset(a.members) - frozenset(b.members)
    own_b = frozenset(b.members) - frozenset(a.members)
    mutual = _reaches(of_step, a, own_b) and _reaches(of_step, b, own_a)
    left_to_other = (own_b, own_a) if mutual else (frozenset(), frozenset())
    return all(
        _heads_trained(of_step, s, keep, other)
        for s, other in zip((a, b), left_to_other, strict=True)
    )


def one_backward(run: WatchRun, a: Series, b: Series) -> bool:
    """Most steps of either optimizer follow the very backward a step of the other follows
    (CURL's encoder and contrastive optimizers, both stepped after the contrastive loss's
    backward): one gradient applied twice."""
    of_step = _backwards(run)
    shared = _shared_backwards(of_step, a, b)
    return any(
        statistics.mean(of_step[r.step].number in shared for r in s.steps) > 0.5 for s in (a, b)
    )


def _shared_backwards(of_step: dict[int, Backward], a: Series, b: Series) -> set[int]:
    return {of_step[r.step].number for r in a.steps} & {of_step[r.step].number for r in b.steps}


def _judged_backwards(of_step: dict[int, Backward], s: Series) -> list[Backward]:
    return [of_step[r.step] for r in s.steps if r.detail and r.backward_calls > 0]


def _reaches(of_step: dict[int, Backward], s: Series, head: frozenset[int]) -> bool:
    """Most backwards before `s`'s steps give a gradient to some tensor of `head`."""
    judged = _judged_backwards(of_step, s)
    return bool(judged) and statistics.mean(bool(b.fed and b.fed & head) for b in judged) > 0.5


def _heads_trained(
    of_step: dict[int, Backward], s: Series, shared: set[int], others_head: frozenset[int]
) -> bool:
    judged = _judged_backwards(of_step, s)
    if not judged:
        return False
    return statistics.mean(_own_head(b, shared, others_head) for b in judged) > 0.5


def _own_head(b: Backward, shared: set[int], others_head: frozenset[int]) -> bool:
    """Fed tensors beyond the shared ones, and every fed tensor stepped after it, save the
    other player's own head (its optimizer steps those on its own backward)."""
    return b.fed is not None and bool(b.fed - shared) and b.fed - b.stepped <= others_head


def _backwards(run: WatchRun) -> dict[int, Backward]:
    """Each step's backward: consecutive steps with the same loss and the same gradients
    (no backward between them) share one."""
    groups: list[list[StepRecord]] = []
    for r in run.steps:
        q = groups[-1][-1] if groups else None
        if q is not None and q.loss == r.loss and q.param_norms == r.param_norms:
            groups[-1].append(r)
        else:
            groups.append([r])
    out: dict[int, Backward] = {}
    for n, group in enumerate(groups):
        before = groups[n - 1][-1] if n else None
        stepped = frozenset(i for r in group for i in run.members_of(r.optimizer))
        backward = Backward(n, _fed(before, group[0]), stepped)
        out.update((r.step, backward) for r in group)
    return out


def _fed(before: StepRecord | None, r: StepRecord) -> frozenset[int] | None:
    """Tensors this backward gave a gradient: non-zero, and not the very norm they held at
    the step before (a gradient left from an earlier backward keeps its norm)."""
    if not r.detail or (before is not None and not before.detail):
        return None
    old = before.param_norms if before is not None else ()
    return frozenset(
        i for i, norm in enumerate(r.param_norms) if norm and (i >= len(old) or old[i] != norm)
    )
