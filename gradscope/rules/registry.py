"""One declaration per rule, next to its check: `@rule(...)` gives the rule's id, slug,
severity, troubleshooting row, stage, summary, thresholds (the `Threshold`s it owns:
key, default, meaning; the keys of those it shares), example, fix, the objectives it
judges, the findings it explains (a cause: rules/causes.py), those it supersedes and its
mark in the watch views; the check's docstring is its "why".

A declaration fills `findings.RULES` (the metadata every report reads), `DOCS` (what
`gradscope rules GSxxx` and docs/rules.md say) and the stage's list of checks, so adding
a rule touches its own module and its test. Every family is declared this way, on the
function that makes its findings: per-run (rules/), baseline (gate/baseline.py),
gradcheck, watch, distributed and diff. Each registry is a `catalogue.Declared`: its first
read loads every module gradscope/catalogue.py lists, so it is complete wherever it is
read, and nothing loads a rule before then. No torch.
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from gradscope import catalogue
from gradscope.catalogue import Declared
from gradscope.findings import MARKS, RULES, THRESHOLDS, Mark, Rule, Severity, Threshold
from gradscope.troubleshooting import TABLE


class Stage(enum.Enum):
    """Where a rule's findings come from (`Rule.source` holds its value)."""

    RUN = "run"
    BASELINE = "baseline"
    GRADCHECK = "gradcheck"
    WATCH = "watch"
    DISTRIBUTED = "distributed"
    DIFF = "diff"


class When(enum.Enum):
    """Where in the same optimizer's steps a cause explains its symptoms (rules/causes.py)."""

    ANYWHERE = "anywhere"
    """A mechanism: wherever the symptom is (gradients never reset)."""
    AT_ITS_STEPS = "at its steps"
    """A cause of one moment: only where their steps meet (one layer's spike)."""
    BEFORE = "before"
    """A precursor, a warning before a divergence: a symptom from its first step on, which
    holds the lead (its first step minus the warning's)."""


@dataclass(frozen=True)
class Cause:
    explains: tuple[str, ...]
    """The rules whose findings it explains in the same optimizer's steps."""
    when: When = When.ANYWHERE


@dataclass(frozen=True)
class RuleDoc:
    why: str
    """What is measured and against which threshold, in the words of the rule's code."""
    example: str
    """A situation that makes the rule fire."""
    fix: str
    """What to change in the model, the script or the settings."""
    command: str = ""
    """A command that makes it fire on code shipped with gradscope ("" where none does)."""
    thresholds: tuple[str, ...] = ()
    """The configuration keys that tune it (configs/default.toml)."""
    objectives: str = ""
    """Which training objectives it judges and why, as "which: why" ("any: ..." for a
    mechanism independent of what the loss means); "" where the loss plays no part.
    Every watch rule declares it (tests/rules/test_registry.py)."""


DOCS: Declared[str, RuleDoc] = Declared()
"""Rule id → its docs, for the rules declared with `@rule`."""

CAUSES: Declared[str, Cause] = Declared()
"""Cause rule → what it explains and when (`explains=`, `explains_when=` of its `@rule`)."""

SUPERSEDES: Declared[str, tuple[str, ...]] = Declared()
"""Rule id → the rules whose findings about the same thing would say something untrue
beside it, so they are dropped (rules/causes.py applies it)."""

DECLARED = Rule("", "", Severity.INFO, "", "", "")
"""The default a check gives its keyword-only `this: Rule` parameter in its source; `@rule`
puts the declared Rule there, so the check makes its findings with `this.finding(...)`
and its id and severity are written once, on the declaration."""

_CHECKS: dict[Stage, dict[str, Callable[..., Any]]] = {}
_DECLARED_IN: dict[str, str] = {}
"""Threshold key → the module that declares it."""

F = TypeVar("F", bound=Callable[..., Any])


def why_of(check: Callable[..., Any]) -> str:
    """The check's docstring as one paragraph: the rule's "why"."""
    return " ".join(inspect.cleandoc(check.__doc__ or "").split())


def _refuse_a_wrong_declaration(
    id: str, row: str, owned: list[Threshold], explains: bool, explains_when: When
) -> None:
    """A rule or threshold declared twice, an unknown row, a `when` without a cause."""
    if RULES.holds(id):
        raise ValueError(f"rule {id} is declared twice")
    if row not in TABLE:
        raise ValueError(f"{id}: no troubleshooting row {row!r}")
    for t in owned:
        if THRESHOLDS.holds(t.key):
            raise ValueError(f"{id}: threshold {t.key} is declared twice")
    if explains_when is not When.ANYWHERE and not explains:
        raise ValueError(f"{id}: explains_when without explains")


def rule(
    id: str,
    slug: str,
    severity: Severity,
    row: str,
    stage: Stage,
    summary: str,
    *,
    example: str,
    fix: str,
    thresholds: tuple[Threshold | str, ...] = (),
    supersedes: tuple[str, ...] = (),
    command: str = "",
    objectives: str = "",
    explains: tuple[str, ...] = (),
    explains_when: When = When.ANYWHERE,
    mark: Mark | None = None,
) -> Callable[[F], F]:
    """Declare the rule the decorated check produces; one check, one rule."""
    owned = [t for t in thresholds if isinstance(t, Threshold)]
    _refuse_a_wrong_declaration(id, row, owned, bool(explains), explains_when)
    keys = tuple(t.key if isinstance(t, Threshold) else t for t in thresholds)

    def register(check: F) -> F:
        why = why_of(check)
        if not why:
            raise ValueError(f"{id}: {check.__name__} needs a docstring (the rule's why)")
        RULES[id] = declared_rule = Rule(id, slug, severity, row, summary, stage.value)
        defaults = getattr(check, "__kwdefaults__", None) or {}
        if defaults.get("this") is DECLARED:
            setattr(check, "__kwdefaults__", {**defaults, "this": declared_rule})  # noqa: B010
        DOCS[id] = RuleDoc(why, example, fix, command, keys, objectives)
        for t in owned:
            THRESHOLDS[t.key] = t
            _DECLARED_IN[t.key] = check.__module__
        if supersedes:
            SUPERSEDES[id] = supersedes
        if explains:
            CAUSES[id] = Cause(explains, explains_when)
        if mark is not None:
            MARKS[id] = mark
        _CHECKS.setdefault(stage, {})[id] = check
        return check

    return register


def _declared(stage: Stage) -> dict[str, Callable[..., Any]]:
    """The stage's checks, every module of the catalogue loaded first."""
    catalogue.load()
    return _CHECKS.get(stage, {})


def in_declared_order(stage: Stage) -> dict[str, Callable[..., Any]]:
    """Rule id → the stage's check, in the order the catalogue lists their modules (the
    per-run rules run in that order), a module's own in the order it declares them."""
    declared = _declared(stage)
    ordered = sorted(declared, key=lambda k: catalogue.position(declared[k].__module__))
    return {k: declared[k] for k in ordered}


def thresholds_in_order() -> list[Threshold]:
    """The declared thresholds in the order the catalogue lists their modules, a module's
    own in the order it declares them, whatever imported first (docs/config.md's table)."""
    catalogue.load()
    return sorted(THRESHOLDS.values(), key=lambda t: catalogue.position(_DECLARED_IN[t.key]))


def checks(stage: Stage) -> list[Callable[..., Any]]:
    """The stage's declared checks, by rule id (a stable order, whatever imported first)."""
    declared = _declared(stage)
    return [declared[k] for k in sorted(declared)]


def declared(stage: Stage) -> list[str]:
    """The ids of the stage's declared rules, sorted."""
    return sorted(_declared(stage))
