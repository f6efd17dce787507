"""Cause first: which watch finding explains which, and what that does to the report.

A missing zero_grad makes the gradients grow, spike and turn NaN; a maximised loss
explodes; a learning rate too high stalls the loss. When a cause and its symptoms are
found in the same optimizer's steps, the symptom says so (`explained_by`), its advice
points to the cause instead of contradicting it ("lower the learning rate" when the
gradients are never reset), and the report lists causes before symptoms.
"""

from __future__ import annotations

from dataclasses import replace

from gradscope.findings import Finding, Severity
from gradscope.rules.registry import SUPERSEDES
from gradscope.rules.step_common import module_of
from gradscope.rules.step_meaning import DEAD_EVIDENCE, lr_above_weights
from gradscope.steps.records import WatchRun

_KILLED = ("GS405", "GS410", "GS417")
"""What GS419 explains only for the parameters whose gradients it saw die."""

_SCALE = ("GS412", "GS435", "GS438")
"""Causes that change the gradients' size: an Adam-like step (about lr per element) does not
follow it, so GS419's lr-against-the-weights evidence stands without them."""

NEVER_SHARE = 0.2
"""GS413 explains the loss's findings when at least this share of its optimizer's tensors
never got a gradient (a detached head), not for an unused leftover layer."""

_GROWTH = ("GS401", "GS402", "GS403", "GS404", "GS406", "GS409", "GS414", "GS415", "GS419")

_LR_HIGH = ("GS401", "GS402", "GS403", "GS404", "GS409", "GS414", "GS415", *_KILLED)

EXPLAINS: dict[str, tuple[str, ...]] = {
    "GS412": (*_GROWTH, "GS450", "GS451"),  # never reset: they pile up, grow, spike, overflow
    "GS435": (*_GROWTH, "GS450", "GS451"),  # 1 of K micro-batches applied; step 1's loss 1/K
    "GS436": ("GS405", "GS410", "GS413", "GS415", "GS417"),  # lr ~0: nothing moves
    "GS437": ("GS405", "GS410", "GS411", "GS413", "GS415", "GS417"),  # the model never moves
    "GS438": ("GS401", "GS402", "GS403", "GS404", "GS405", "GS409", "GS414", "GS415"),  # × B
    "GS418": _GROWTH,  # a maximised loss runs away
    "GS422": ("GS405", "GS410", "GS413", "GS415", "GS417"),  # no gradient is ever applied
    "GS420": ("GS405", "GS409", "GS410", "GS413", "GS415", "GS419"),  # decay erases weights
    "GS416": ("GS406", "GS415"),  # clipping scaled gradients cuts every update
    "GS433": ("GS401", "GS403", "GS407", "GS408", "GS434"),  # a NaN made in the backward
    "GS434": ("GS401", "GS403", "GS407", "GS408"),  # its update wrote the NaN into the weights
    "GS431": ("GS405", "GS409", "GS414", "GS415", "GS419"),  # probabilities fed as logits
    "GS419": _LR_HIGH,  # lr too high; gradients it killed (GS405, GS410, GS417: see _explains)
    "GS413": ("GS414", "GS415"),  # a large part never learns: the loss cannot fall (_explains)
    "GS442": ("GS405", "GS410", "GS415"),  # eps outweighs √v̂: SGD with a tiny step
    "GS450": ("GS402", "GS403"),  # one layer's spike drives the total's, the loss's
    "GS451": (*_GROWTH, "GS450"),  # Adam's v lags a large gradient: a huge update
    "GS452": (*_GROWTH, "GS450", "GS451"),  # an lr jump: every update larger, it diverges
    "GS453": (*_GROWTH, "GS450", "GS451"),  # attention logits saturate the softmax
    "GS454": (*_GROWTH, "GS450", "GS451"),  # the output logits' level drifts off
}
"""Cause rule → the rules whose findings it explains in the same optimizer's steps. GS419
is both: every cause that explains it also supersedes it (`supersedes=` on the cause's
`@rule`, rules/registry.py SUPERSEDES)."""

AT_ITS_STEPS = frozenset({"GS450"})
"""Causes of one moment: they explain a symptom only where their steps meet."""
PRECURSORS = frozenset({"GS451", "GS452", "GS453", "GS454"})
"""Warnings before a divergence: they explain a symptom only from their step on, and the
symptom holds the lead (its first step minus the warning's)."""


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
                for c in causes
                if c is not f
                and f.rule in EXPLAINS[c.rule]
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
                advice=f"a consequence of {cause.slug} ({cause.rule}){_warned(cause, f)}: "
                "fix that first",
                lead=_lead(cause, f),
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
    causes = [f for f in findings if f.rule in EXPLAINS and f.ignored_by is None]
    mechanisms = [c for c in causes if c.rule not in PRECURSORS | AT_ITS_STEPS]
    causes = [
        c
        for c in causes
        if c.rule not in PRECURSORS | AT_ITS_STEPS
        or not any(c.rule in EXPLAINS[m.rule] and _same_series(run, m, c) for m in mechanisms)
    ]
    return sorted(causes, key=_earliest_warning)


def _earliest_warning(cause: Finding) -> tuple[bool, int]:
    """The precursors first, the earliest of them first: a symptom's first warning; the
    other causes after them in the judge's order (a stable sort keeps it)."""
    if cause.rule not in PRECURSORS:
        return True, 0
    return False, cause.steps[0] if cause.steps else 2**62


def _in_time(cause: Finding, symptom: Finding) -> bool:
    """A cause of one moment meets the symptom's steps; a precursor comes before them."""
    if cause.rule in AT_ITS_STEPS:
        return bool(set(cause.steps) & set(symptom.steps))
    if cause.rule in PRECURSORS and symptom.steps:  # (a verdict on the whole run: any)
        return bool(cause.steps) and symptom.steps[0] >= cause.steps[0]
    return True


def _lead(cause: Finding, symptom: Finding) -> int | None:
    """Steps from a precursor's warning to the symptom it announced."""
    if cause.rule not in PRECURSORS or not cause.steps or not symptom.steps:
        return None
    return symptom.steps[0] - cause.steps[0]


def _warned(cause: Finding, symptom: Finding) -> str:
    lead = _lead(cause, symptom)
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
    return f.rule == "GS419" and cause.rule in _SCALE and lr_above_weights(run, f.subject)


def _explains(run: WatchRun, cause: Finding, f: Finding, findings: list[Finding]) -> bool:
    """The cause really explains this symptom: GS419 the gradients it saw die (its
    evidence names them), GS413 the loss's level only where a large share of the model never
    learned; a finding that stands without its cause is no symptom."""
    if stands_without(run, cause, f):
        return False
    if cause.rule == "GS419" and f.rule in _KILLED:
        dead = next((e for e in cause.evidence if e.startswith(DEAD_EVIDENCE)), "")
        names = [n.rpartition(" (")[0] for n in dead.removeprefix(DEAD_EVIDENCE).split(", ")]
        return any(
            n.startswith(f.subject + ".") or module_of(n) == module_of(f.subject)
            for n in names
            if n
        )
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
