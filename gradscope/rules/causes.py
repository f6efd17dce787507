"""Cause first: which watch finding explains which, and what that does to the report.

A missing zero_grad makes the gradients grow, spike and turn NaN; a maximised loss
explodes; a learning rate too high stalls the loss. When a cause and its symptoms are
found in the same optimizer's steps, the symptom says so (`explained_by`), its advice
points to the cause instead of contradicting it ("lower the learning rate" when the
gradients are never reset), and the report lists causes before symptoms.
"""

from __future__ import annotations

from dataclasses import replace

from gradscope.findings import Finding
from gradscope.rules.registry import SUPERSEDES
from gradscope.steps.records import WatchRun

_GROWTH = ("GS401", "GS402", "GS403", "GS404", "GS406", "GS409", "GS414", "GS415", "GS419")

EXPLAINS: dict[str, tuple[str, ...]] = {
    "GS412": _GROWTH,  # gradients never reset: they pile up, grow, spike, overflow
    "GS435": _GROWTH,  # 1 of K micro-batches applied; step 1's loss 1 of K, later ones K
    "GS436": ("GS405", "GS410", "GS413", "GS415", "GS417"),  # lr ~0: nothing moves
    "GS437": ("GS405", "GS410", "GS411", "GS413", "GS415", "GS417"),  # the model never moves
    "GS438": ("GS401", "GS402", "GS403", "GS404", "GS405", "GS409", "GS414", "GS415"),  # × B
    "GS418": _GROWTH,  # a maximised loss runs away
    "GS422": ("GS405", "GS410", "GS413", "GS415", "GS417"),  # no gradient is ever applied
    "GS420": ("GS405", "GS409", "GS410", "GS413", "GS415", "GS419"),  # decay erases weights
    "GS416": ("GS406", "GS415"),  # clipping scaled gradients cuts every update
    "GS431": ("GS405", "GS409", "GS414", "GS415", "GS419"),  # probabilities fed as logits
    "GS419": ("GS401", "GS402", "GS403", "GS404", "GS409", "GS414", "GS415"),  # lr too high
    "GS450": ("GS402", "GS403"),  # one layer's spike drives the total's, the loss's
    "GS451": (*_GROWTH, "GS450"),  # Adam's v lags a large gradient: a huge update
    "GS452": (*_GROWTH, "GS450", "GS451"),  # an lr jump: every update larger, it diverges
}
"""Cause rule → the rules whose findings it explains in the same optimizer's steps. GS419
is both: every cause that explains it also supersedes it (`supersedes=` on the cause's
`@rule`, rules/registry.py SUPERSEDES)."""

AT_ITS_STEPS = frozenset({"GS450"})
"""Causes of one moment: they explain a symptom only where their steps meet."""
PRECURSORS = frozenset({"GS451", "GS452"})
"""Warnings before a divergence: they explain a symptom only from their step on, and the
symptom holds the lead (its first step minus the warning's)."""


def link(run: WatchRun, findings: list[Finding]) -> list[Finding]:
    """Each symptom marked with its cause, advice pointing there; the causes of what was
    found first, then the findings nothing explains, then the symptoms; worst first."""
    findings = superseded(run, findings)
    causes = [f for f in findings if f.rule in EXPLAINS and f.ignored_by is None]
    causes.sort(key=_earliest_warning)
    out = []
    for f in findings:
        cause = next(
            (
                c
                for c in causes
                if c is not f
                and f.rule in EXPLAINS[c.rule]
                and _same_series(run, c, f)
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


def _earliest_warning(cause: Finding) -> tuple[bool, int]:
    """The precursors first, the earliest of them first: a symptom's first warning."""
    return cause.rule not in PRECURSORS, cause.steps[0] if cause.steps else 2**62


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
            for c in causes
        )
    ]


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
