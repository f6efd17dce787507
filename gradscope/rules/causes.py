"""Cause first: which watch finding explains which, and what that does to the report.

A missing zero_grad makes the gradients grow, spike and turn NaN; a maximised loss
explodes; a learning rate too high stalls the loss. When a cause and its symptoms are
found in the same optimizer's steps, the symptom says so (`explained_by`), its advice
points to the cause instead of contradicting it ("lower the learning rate" when the
gradients are never reset), and the report lists causes before symptoms. What a cause
explains, and when, is declared on it (`@rule(explains=..., explains_when=...)`).
"""

from __future__ import annotations

from dataclasses import replace

from gradscope.findings import Finding, Severity
from gradscope.rules.held_at_zero import held_at_zero
from gradscope.rules.loss_diverged import diverged_at
from gradscope.rules.registry import CAUSES, SUPERSEDES, When
from gradscope.rules.step_common import module_of
from gradscope.rules.step_meaning import DEAD_EVIDENCE, lr_above_weights
from gradscope.rules.symptoms import KILLED
from gradscope.steps.records import WatchRun

_SCALE = ("GS412", "GS435", "GS438")
"""Causes that change the gradients' size: an Adam-like step (about lr per element) does not
follow it, so GS419's lr-against-the-weights evidence stands without them."""

NEVER_SHARE = 0.2
"""GS413 explains the loss's findings when at least this share of its optimizer's tensors
never got a gradient (a detached head), not for an unused leftover layer."""


def _when(rule: str) -> When | None:
    """How the rule explains (`explains_when=` of its `@rule`); None: it explains nothing.
    What each cause explains is its `explains=`: CAUSES. GS419 is both cause and symptom
    (a cause that makes it untrue supersedes it: `supersedes=`, SUPERSEDES)."""
    return CAUSES[rule].when if rule in CAUSES else None


def link(run: WatchRun, findings: list[Finding]) -> list[Finding]:
    """Each symptom marked with its cause, advice pointing there; the causes of what was
    found first, then the findings nothing explains, then the symptoms; worst first."""
    findings = superseded(run, findings)
    causes = _causes(run, findings)
    out = []
    for f in findings:
        cause = next(
            (
                c
                for c in _at_its_start(causes, f)
                if c is not f
                and f.rule in CAUSES[c.rule].explains
                and _same_series(run, c, f)
                and _explains(run, c, f, findings)
                and _in_time(c, f)
            ),
            None,
        )
        if cause is not None:
            f = replace(
                f,
                explained_by=f"{cause.rule}:{cause.subject}",
                advice=f"a consequence of {cause.slug} ({cause.rule}){_warned(run, cause, f)}: "
                "fix that first",
                lead=_lead(run, cause, f),
            )
        out.append(f)
    leading = {f.explained_by for f in out if f.explained_by}
    return sorted(
        out,
        key=lambda f: (
            f.explained_by is not None,  # symptoms last,
            f"{f.rule}:{f.subject}" not in leading,  # causes of what is found first,
            -f.severity,
            f.rule,
        ),
    )


def _causes(run: WatchRun, findings: list[Finding]) -> list[Finding]:
    """The findings that may explain others, the earliest warning first; a precursor or a
    spike that a mechanism explains (a layer spike of gradients never reset) is one of
    its symptoms, never a cause of the others."""
    causes = [f for f in findings if f.rule in CAUSES and f.ignored_by is None]
    mechanisms = [c for c in causes if _when(c.rule) is When.ANYWHERE]
    causes = [
        c
        for c in causes
        if _when(c.rule) is When.ANYWHERE
        or not any(
            c.rule in CAUSES[m.rule].explains and _same_series(run, m, c) for m in mechanisms
        )
    ]
    return sorted(causes, key=_earliest_warning)


def _at_its_start(causes: list[Finding], symptom: Finding) -> list[Finding]:
    """After the precursors (each warned before the symptom: its root), the causes found
    at the symptom's first step: what happened there (a NaN the backward made from a
    finite loss, GS434) explains it before a verdict on the whole run (an lr too high),
    which a NaN of that kind does not follow from; the order kept else."""
    if not symptom.steps:
        return causes
    at = symptom.steps[0]
    return sorted(causes, key=lambda c: _when(c.rule) is not When.BEFORE and at not in c.steps)


def _earliest_warning(cause: Finding) -> tuple[bool, int]:
    """The precursors first, the earliest of them first: a symptom's first warning; the
    other causes after them in the judge's order (a stable sort keeps it)."""
    if _when(cause.rule) is not When.BEFORE:
        return True, 0
    return False, cause.steps[0] if cause.steps else 2**62


def _in_time(cause: Finding, symptom: Finding) -> bool:
    """A cause of one moment meets the symptom's steps; a precursor comes before them."""
    if _when(cause.rule) is When.AT_ITS_STEPS:
        return bool(set(cause.steps) & set(symptom.steps))
    if _when(cause.rule) is When.BEFORE and symptom.steps:  # (a verdict on the whole run: any)
        return bool(cause.steps) and symptom.steps[0] >= cause.steps[0]
    return True


def _lead(run: WatchRun, cause: Finding, symptom: Finding) -> int | None:
    """Steps from a precursor's warning to the symptom it announced; to a verdict on the
    whole run (GS415: the loss ended no better), from the warning to the step the loss
    diverged and stayed (one optimizer's loss only)."""
    if _when(cause.rule) is not When.BEFORE or not cause.steps:
        return None
    if symptom.steps:
        return symptom.steps[0] - cause.steps[0]
    if len(run.optimizers) > 1:
        return None
    losses = [(r.step, r.loss) for r in run.steps if not r.skipped and r.loss is not None]
    broke = diverged_at(losses)
    return None if broke is None or broke < cause.steps[0] else broke - cause.steps[0]


def _warned(run: WatchRun, cause: Finding, symptom: Finding) -> str:
    lead = _lead(run, cause, symptom)
    return "" if lead is None else f", which warned {lead} steps before"


def superseded(run: WatchRun, findings: list[Finding]) -> list[Finding]:
    """Without the findings a cause the user did not ignore supersedes (its rule's
    `supersedes=`) about the same thing: its parameter when it is about one, else its
    optimizer's steps."""
    causes = [f for f in findings if f.rule in SUPERSEDES and f.ignored_by is None]
    names = {p.name for p in run.params}
    return [
        f
        for f in findings
        if not any(
            f.rule in SUPERSEDES[c.rule]
            and (f.subject == c.subject if c.subject in names else _same_series(run, c, f))
            and not stands_without(run, c, f)
            for c in causes
        )
    ]


def stands_without(run: WatchRun, cause: Finding, f: Finding) -> bool:
    """The finding's evidence holds without the cause: an Adam-like lr at or above the
    weights' own size (GS419) is too high whatever piles up in or scales the gradients."""
    return (
        f.rule == "GS419" and cause.rule in (*_SCALE, "GS413") and lr_above_weights(run, f.subject)
    )


def _explains(run: WatchRun, cause: Finding, f: Finding, findings: list[Finding]) -> bool:
    """The cause really explains this symptom: GS419 the gradients it saw die (its
    evidence names them), GS411 what a gate it holds at 0 multiplies, GS413 the loss's
    level only where a large share of the model never learned, GS442 nothing where eps held
    the first steps only; a finding that stands without its cause is no symptom."""
    if stands_without(run, cause, f):
        return False
    if cause.rule == "GS419" and f.rule in KILLED:
        dead = next((e for e in cause.evidence if e.startswith(DEAD_EVIDENCE)), "")
        names = [n.rpartition(" (")[0] for n in dead.removeprefix(DEAD_EVIDENCE).split(", ")]
        return any(
            n.startswith(f.subject + ".") or module_of(n) == module_of(f.subject)
            for n in names
            if n
        )
    if cause.rule == "GS440":  # only BatchNorms on statistics never measured: no norm at all
        norms = any(e.startswith("BatchNorms: ") for e in cause.evidence)
        return norms and any(g.rule == "GS441" for g in findings)
    if cause.rule == "GS411":  # a gate held at 0 outside the optimizer
        return f.rule == "GS413" and held_at_zero(run, cause.subject, f.subject)
    if cause.rule == "GS406":  # a clip to max_norm 0 only: it zeroed every gradient
        return cause.value == 0.0
    if cause.rule == "GS442" and cause.severity < Severity.WARNING:
        return False  # eps held the first steps only: the rest of the run is Adam's own
    if cause.rule == "GS413":
        if cause.severity < Severity.WARNING:
            return False
        never = {g.subject for g in findings if g.rule == "GS413" and g.severity >= cause.severity}
        members = _members(run, cause)
        return bool(members) and len(never & members) >= NEVER_SHARE * len(members)
    return True


def _members(run: WatchRun, cause: Finding) -> set[str]:
    """The names of the parameters stepped by the optimizer the cause's parameter is in."""
    for index in range(len(run.optimizers)):
        names = {run.params[i].name for i in run.members_of(index) if i < len(run.params)}
        if cause.subject in names:
            return names
    return set()


def _same_series(run: WatchRun, cause: Finding, symptom: Finding) -> bool:
    """Both are about the same optimizer: with one optimizer always; with several, the
    optimizer named in the cause's subject, and a symptom that names it too or is about
    one of its parameters."""
    if len(run.optimizers) <= 1:
        return True
    for index in range(len(run.optimizers)):
        label = run.optimizer_label(index)
        if cause.subject.endswith(f"({label})"):
            if symptom.subject.endswith(f"({label})"):
                return True
            names = {run.params[i].name for i in run.members_of(index) if i < len(run.params)}
            return symptom.subject in names or any(
                n.startswith(symptom.subject + ".") for n in names
            )
    return False
