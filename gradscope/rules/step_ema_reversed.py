"""GS475: an EMA update run backwards: the script writes the trained model in place between
its optimizer's steps while the copy that should follow it (the EMA teacher, the momentum
encoder) never moves. lightly's `update_momentum(model, model_ema, m)` given the teacher
first, or a hand-written `ema.data = m * ema.data + (1 - m) * p.data` with the two swapped,
pulls the student toward its frozen starting point and leaves the targets fixed
(watcher/hand_moved.py). No torch."""

from __future__ import annotations

from dataclasses import dataclass, field

from gradscope.config import Thresholds
from gradscope.findings import Finding, Severity
from gradscope.rules.copies_of import copy_of, top, trained_shapes
from gradscope.rules.registry import DECLARED, Rule, Stage, rule
from gradscope.rules.step_common import values_changed
from gradscope.rules.step_setup import got_grad
from gradscope.rules.still_targets import still_untracked
from gradscope.steps.records import WatchRun

READS = 2
"""Intervals between steps compared, the script's in-place write seen in every one."""


@dataclass
class _Copy:
    """One top-level module's tensors that mirror a written model's trained ones."""

    twins: set[str] = field(default_factory=set)
    still: bool = True


@rule(
    "GS475",
    "ema-reversed",
    Severity.WARNING,
    "ema-reversed",
    Stage.WATCH,
    "watch: the script writes a trained model in place between its optimizer's steps while "
    "its copy (an EMA teacher, a momentum encoder) never changes: the EMA update's arguments "
    "are swapped, so the student is pulled toward the frozen copy",
    example="BYOL with update_momentum(model.backbone_momentum, model.backbone, m): the "
    "backbone moves 0.4% of the way to its frozen starting copy after each step",
    fix="give the EMA update the trained model first and its copy second "
    "(update_momentum(model.backbone, model.backbone_momentum, m); "
    "ema.data = m * ema.data + (1 - m) * p.data)",
    objectives=(
        "any with a target network: whether the script writes the trained parameters or "
        "their copy in place between steps (version counters; a write through .data by a "
        "changed bit pattern) and whether the copy's values ever changed; a copy is a model "
        "whose every parameter is a twin, by name and shape, of the written model's"
    ),
)
def ema_reversed(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """A top-level module whose every trained parameter (in an optimizer, given a gradient)
    the script wrote in place between steps at every interval compared (two at least), and
    another top-level module that mirrors all of them (same name below it, same shape),
    that no optimizer trained, the script never wrote, and whose every value ended as it
    started, while no copy of the written model changed. A healthy EMA writes the copy and
    leaves the trained model to its optimizer (the copy changes); weight clipping or a
    renorm writes a model that has no frozen copy; a fixed reference (a KL's anchor) is a
    copy of a model nothing writes by hand; CoTTA's stochastic restore writes the student
    from a frozen source copy while its EMA teacher, another copy, follows the student; an
    episodic reset (TENT, MEMO) puts the starting values back, which is no EMA. A copy in no
    optimizer (an RL target critic made by deepcopy) is not among the run's tensors: the
    copies seen running without gradients stand for it (still_targets.py)."""
    reset = set(run.state_facts.put_back)
    moved = {i for i in run.state_facts.hand_moved if i < len(run.params) and i not in reset}
    if run.state_facts.hand_compared < READS or not moved:
        return []
    trained = {i for i, p in enumerate(run.params) if p.in_optimizer and got_grad(run, i)}
    untracked = [
        _finding(this, model, copy, n, run.state_facts.hand_compared)
        for model, (copy, n) in still_untracked(run, trained, moved).items()
    ]
    written = _wholly_written(run, trained, moved)
    if not written:
        return untracked
    originals = trained_shapes(run, {i for i in trained if top(run.params[i].name) in written})
    copies: dict[tuple[str, str], _Copy] = {}
    touched: set[str] = {top(run.params[i].name) for i in trained | moved}
    for i, p in enumerate(run.params):
        twin = copy_of(p, originals)
        if i in trained or i in moved or not twin or top(twin) == top(p.name):
            continue
        found = copies.setdefault((top(p.name), top(twin)), _Copy())
        found.twins.add(twin)
        found.still = found.still and values_changed(p) is False
    followed = {root for (copy, root), found in copies.items() if not found.still}
    frozen: dict[str, str] = {}
    for (copy, root), found in copies.items():
        if found.still and root not in followed and copy not in touched:
            if found.twins == written[root]:
                frozen.setdefault(root, copy)  # the first such copy, in the run's order
    compared = run.state_facts.hand_compared
    return [
        _finding(this, root, copy, len(written[root]), compared) for root, copy in frozen.items()
    ] + untracked


def _wholly_written(run: WatchRun, trained: set[int], moved: set[int]) -> dict[str, set[str]]:
    """Top-level module → its trained parameters' names, where the script wrote every one
    of them by hand at every interval (two at least: a single tensor is a scale, not a
    model)."""
    roots: dict[str, set[str]] = {}
    every: dict[str, bool] = {}
    for i in trained:
        name = run.params[i].name
        if "." not in name:
            continue
        roots.setdefault(top(name), set()).add(name)
        every[top(name)] = every.get(top(name), True) and i in moved
    return {root: names for root, names in roots.items() if every[root] and len(names) >= 2}


def _finding(this: Rule, root: str, copy: str, count: int, compared: int) -> Finding:
    message = (
        f"{root} ({count} parameters), which its optimizer trains, is written in place by "
        f"the script between optimizer steps at every interval compared ({compared}), while "
        f"{copy}, a copy of it (every parameter a twin by name and shape), never changed: "
        "the EMA update runs backwards (its arguments swapped), pulling the student toward "
        "its frozen starting copy while the targets never follow the student"
    )
    advice = (
        f"give the EMA update {root} first and {copy} second (lightly's "
        f"update_momentum({root}, {copy}, m); by hand: ema.data = m * ema.data + (1 - m) * "
        "p.data); if a pull toward a fixed copy is meant (a regulariser toward the starting "
        "weights), ignore this finding"
    )
    return this.finding(root, message, advice, value=float(compared), threshold=float(READS))
