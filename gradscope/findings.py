"""What a finding is (Finding, Rule, Severity), on a row of the troubleshooting TABLE
(troubleshooting.py), and RULES, every rule by id.

RULES is filled by the `@rule` declarations on the functions that make the findings
(gradscope/rules/registry.py); its first read loads every module the catalogue lists
(gradscope/catalogue.py), so it is complete wherever it is read. Settings act on findings
in one place, `config.Settings.judged`. No torch, and nothing above this module, imported
here.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from gradscope.catalogue import Declared
from gradscope.troubleshooting import TABLE, TableRow


class Severity(enum.IntEnum):
    """Ordered so that `severity >= fail_on` is the CI gate."""

    INFO = 10
    WARNING = 20
    ERROR = 30

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls[text.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown severity {text!r} (use info, warning or error)") from None

    def __str__(self) -> str:
        return self.name.lower()


@dataclass(frozen=True)
class Finding:
    rule: str
    """Stable rule id, e.g. GS101."""
    slug: str
    """Human name of the rule, e.g. none-grad."""
    severity: Severity
    subject: str
    """Qualified parameter or module name, or "loss"."""
    message: str
    """What was measured, in one sentence."""
    advice: str
    """What to do about it, specific to this subject."""
    row: TableRow
    value: float | None = None
    threshold: float | None = None
    evidence: tuple[str, ...] = ()
    """Extra facts from explanation passes (which op, which line)."""
    ignored_by: str | None = None
    """The `ignore` pattern (RULE:GLOB) that silenced it; such a finding never fails a run."""
    steps: tuple[int, ...] = ()
    """Watch rules: the optimizer steps it is about (the first ones when there are many),
    which the views mark; () for a finding about no step in particular."""
    explained_by: str | None = None
    """Watch rules: "RULE:subject" of the finding whose cause this one is a symptom of
    (rules/causes.py); its advice then points there."""
    lead: int | None = None
    """Watch rules, a symptom a precursor warned of (explained_by): the steps from the
    warning's step to this finding's first step."""

    def to_dict(self) -> dict[str, Any]:
        steps = {"steps": list(self.steps)} if self.steps else {}
        cause: dict[str, Any] = {"explained_by": self.explained_by} if self.explained_by else {}
        if self.lead is not None:
            cause["lead"] = self.lead
        return {
            "rule": self.rule,
            "slug": self.slug,
            "severity": str(self.severity),
            "subject": self.subject,
            "message": self.message,
            "advice": self.advice,
            "value": self.value,
            "threshold": self.threshold,
            "evidence": list(self.evidence),
            "ignored_by": self.ignored_by,
            **steps,
            **cause,
            "table_row": {
                "symptom": self.row.symptom,
                "cause": self.row.cause,
                "remedy": self.row.remedy,
            },
        }


@dataclass(frozen=True)
class Threshold:
    """A number a rule compares against, declared with the rule that owns it
    (`@rule(thresholds=...)`): the config key of `[thresholds]`, its built-in default and
    what it means (docs/config.md's row). config.Thresholds, configs/default.toml and that
    table follow the declarations (tests/test_config_declared.py)."""

    key: str
    default: float
    doc: str
    above_zero: bool = False
    """It divides, takes a logarithm or sizes a window: 0 has no meaning there."""


THRESHOLDS: Declared[str, Threshold] = Declared()
"""Threshold key → its declaration, in the catalogue's order, filled by `@rule`."""


@dataclass(frozen=True)
class Mark:
    """How the watch views mark the steps of the rule's findings (`Finding.steps`)."""

    label: str
    """Legend text after the rule's id: "norm spike" reads "GS403 norm spike"."""
    symbol: str
    """Terminal character and matplotlib marker key, one per rule."""


MARKS: Declared[str, Mark] = Declared()
"""Rule id → its mark in the watch views (`mark=` of its `@rule`), in the catalogue's
order: the legend's (report/watch_marks.py). A rule about every step (GS412) or one step
(GS417) is left unmarked: its marks would only crowd the rows."""


@dataclass(frozen=True)
class Rule:
    id: str
    slug: str
    severity: Severity
    row: str
    summary: str
    source: str
    """The stage that produces its findings: run, baseline, gradcheck, watch, distributed
    or diff."""

    def finding(
        self,
        subject: str,
        message: str,
        advice: str,
        value: float | None = None,
        threshold: float | None = None,
        evidence: tuple[str, ...] = (),
    ) -> Finding:
        return Finding(
            self.id,
            self.slug,
            self.severity,
            subject,
            message,
            advice,
            TABLE[self.row],
            value,
            threshold,
            evidence,
        )


RULES: Declared[str, Rule] = Declared()
"""Rule id → its metadata, filled by `@rule` (gradscope/rules/registry.py), every rule of
the catalogue loaded on its first read."""


def grouped(findings: list[Finding]) -> list[list[Finding]]:
    """Findings of one rule that share severity, advice and evidence, worst first: one
    paragraph in every report, however many subjects it has."""
    ordered = sorted(findings, key=lambda f: (-f.severity, f.rule))
    groups: dict[tuple[Any, ...], list[Finding]] = {}
    for f in ordered:
        groups.setdefault((f.rule, f.severity, f.advice, f.evidence), []).append(f)
    return list(groups.values())


def subjects_text(group: list[Finding], most: int = 6) -> str:
    names = [f.subject for f in group]
    more = f", ... (+{len(names) - most} more)" if len(names) > most else ""
    return ", ".join(names[:most]) + more


def split_ignored(findings: list[Finding]) -> tuple[list[Finding], list[Finding]]:
    """(active, ignored)."""
    return [f for f in findings if f.ignored_by is None], [f for f in findings if f.ignored_by]


def ignored_summary(ignored: list[Finding]) -> str:
    """ "3 ignored (none-grad:aux.* x2, GS107:* x1)", or "" when nothing was ignored."""
    if not ignored:
        return ""
    counts: dict[str, int] = {}
    for f in ignored:
        counts[str(f.ignored_by)] = counts.get(str(f.ignored_by), 0) + 1
    parts = ", ".join(f"{p} x{n}" for p, n in counts.items())
    return f"{len(ignored)} ignored ({parts})"


def lookup(rule_or_slug: str) -> Rule | None:
    return RULES.get(rule_or_slug.upper()) or next(
        (r for r in RULES.values() if r.slug == rule_or_slug), None
    )
