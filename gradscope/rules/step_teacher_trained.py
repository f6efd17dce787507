"""GS446: a self-distillation target trained by its optimizer: an EMA teacher (BYOL, DINO,
Mean Teacher) that the script moves toward the student between steps, left in the optimizer
with its forward attached, so the loss's gradients move it too (watcher/hand_moved.py). The
target chases the prediction and both can settle at a constant: collapse. No torch."""

from __future__ import annotations

from gradscope.config import Thresholds
from gradscope.findings import Finding, Severity
from gradscope.rules.copies_of import Originals, copy_of, top, trained_shapes
from gradscope.rules.registry import DECLARED, Rule, Stage, rule
from gradscope.rules.step_setup import got_grad
from gradscope.steps.records import ParamInfo, WatchRun

READS = 2
"""Intervals between steps compared, the script's in-place write seen in every one."""


@rule(
    "GS446",
    "teacher-trained",
    Severity.WARNING,
    "teacher-trained",
    Stage.WATCH,
    "watch: a model the script moves by hand between optimizer steps, a copy of a trained "
    "one (an EMA teacher), also gets gradients that its optimizer applies: the "
    "self-distillation target is trained through the loss, with no stop-gradient",
    example="BYOL or DINO with the teacher in the optimizer's param groups and its forward "
    "not under torch.no_grad(): teacher ← 0.99·teacher + 0.01·student after each step",
    fix="compute the teacher's forward under torch.no_grad() (or .detach() its output), "
    "requires_grad_(False) it and leave it out of the optimizer: only the EMA moves it",
    explains=("GS402", "GS405", "GS419"),
    objectives=(
        "any with a target network: the parameters' place in an optimizer, whether gradients "
        "reach them and whether the script writes them in place between steps (version "
        "counters; a write through .data, as DINO's and MoCo's reference EMA, by a changed "
        "float64 norm); a copy is a model whose every such parameter has a trained twin of the "
        "same name and shape under another top-level module. A stop-gradient missing with "
        "no teacher module (SimSiam's z.detach() forgotten) is not seen: both sides of "
        "SimCLR, Barlow Twins or VICReg are attached on purpose, with the same structure"
    ),
)
def teacher_trained(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """torch bumps a tensor's version at every in-place write; a backward filling .grad
    and a zero_grad do not. At sampled steps (1-3, pairs every 25, every 500 after step
    101) the versions of each optimizer's parameters are kept after its step and compared
    at its next step's start; a write through `.data` moves no version, so a norm
    (float64) changed under an unchanged version counts too. Parameters written in place
    between steps at every interval compared (two at least), while holding a gradient, in
    an optimizer that applies it, and each a twin (same name below its top-level module,
    same shape) of a trained parameter of another model the script does not write: an EMA
    teacher, moved toward the student by hand and trained by the loss as well. In BYOL,
    DINO or Mean Teacher the target branch must not get gradients; with them, the
    prediction and the target move toward each other and settle at a constant (the loss
    falls to its floor while the representation collapses). Weight clipping or a renorm
    written by hand on a model that is no copy stays silent. A student the script writes
    in part (CoTTA's stochastic restore of a few weights to the source's, a clamp on one
    layer) is still the original of a copy whose every parameter it writes (the EMA); two
    models both written in part are neither's copy."""
    moved = [i for i in run.state_facts.hand_moved if i < len(run.params)]
    if run.state_facts.hand_compared < READS or not moved:
        return []
    trained = _trained(run)
    wholly = _wholly_moved(run, trained, set(moved))
    twins = _twins(run, trained, {i for i in moved if top(run.params[i].name) in wholly})
    by_root: dict[str, list[ParamInfo]] = {}
    for i in moved:
        p = run.params[i]
        if i in trained and "." in p.name:
            by_root.setdefault(top(p.name), []).append(p)
    written = {run.params[i].name for i in moved}
    out = []
    for root, params in by_root.items():
        pairs = [(p, copy_of(p, twins)) for p in params]
        if len(pairs) < 2 or not all(twin and top(twin) != root for _, twin in pairs):
            continue
        if root not in wholly and any(twin in written for _, twin in pairs):
            continue  # both written in part: neither is the other's EMA
        source = str(pairs[0][1]).partition(".")[0]
        out.append(_finding(this, root, source, len(params), run.state_facts.hand_compared))
    return out


def _trained(run: WatchRun) -> set[int]:
    """Positions of the parameters an optimizer holds that got a gradient."""
    return {i for i, p in enumerate(run.params) if p.in_optimizer and got_grad(run, i)}


def _wholly_moved(run: WatchRun, trained: set[int], moved: set[int]) -> set[str]:
    """Top-level modules whose every trained parameter the script writes by hand at every
    interval (an EMA writes them all; a stochastic restore or a clamp only some)."""
    roots: dict[str, bool] = {}
    for i in trained:
        root = top(run.params[i].name)
        roots[root] = roots.get(root, True) and i in moved
    return {root for root, every in roots.items() if every}


def _twins(run: WatchRun, trained: set[int], copies: set[int]) -> Originals:
    """The trained parameters of the modules the script does not write wholly by hand, by
    name below their top-level module and shape: each copy matched to the one it started
    equal to (twin critics and their two targets share names and shapes)."""
    return trained_shapes(run, trained - copies)


def _finding(this: Rule, root: str, source: str, count: int, compared: int) -> Finding:
    message = (
        f"{root} ({count} parameters) is written in place by the script between optimizer "
        f"steps at every interval compared ({compared}), and is a copy of {source} (every "
        "parameter a twin by name and shape): an EMA teacher or a Polyak-averaged target "
        "network; it also gets gradients, and an optimizer steps it: the target is trained "
        "through the loss (no stop-gradient), so prediction and target move toward each "
        "other (a self-distilled representation collapses to a constant; a TD target no "
        "longer holds still)"
    )
    advice = (
        f"run {root}'s forward under torch.no_grad() (or .detach() its output), call "
        f"{root}.requires_grad_(False) and leave its parameters out of the optimizer: only "
        "the EMA update should move it"
    )
    return this.finding(root, message, advice, value=float(compared), threshold=float(READS))
