"""What a rule declares beside its check (`@rule(explains=..., explains_when=...)`, its
plot mark) is whole: every rule it names exists, and the tables built from the
declarations say what the report needs."""

from __future__ import annotations

import pytest

from gradscope.findings import RULES, Severity
from gradscope.rules import causes
from gradscope.rules.registry import CAUSES, Stage, When, declared, rule
from gradscope.steps.records import ParamInfo, WatchRun
from tests.watcher.watch_scripts import step_record


def test_every_cause_explains_declared_watch_rules_not_itself():
    watch = set(declared(Stage.WATCH))
    assert {"GS412", "GS450", "GS451", "GS454"} <= set(CAUSES)
    for cause, c in CAUSES.items():
        assert cause in watch and c.explains, cause
        assert set(c.explains) <= watch - {cause}, cause
        assert len(set(c.explains)) == len(c.explains), cause


def test_the_declared_timing_decides_the_link():
    """A precursor (When.BEFORE) explains a symptom only from its step on and holds the
    lead; a cause of one moment (When.AT_ITS_STEPS) only where their steps meet."""
    assert CAUSES["GS451"].when is When.BEFORE and CAUSES["GS450"].when is When.AT_ITS_STEPS
    assert CAUSES["GS412"].when is When.ANYWHERE
    params = (ParamInfo("m.weight", (4, 4), True, True, 0.1),)
    run = WatchRun("t", params, [step_record(1)], "completed", 1.0, optimizers=("Adam",))

    def at(rule: str, *steps: int):
        f = RULES[rule].finding("loss", "m", "lower the learning rate")
        return type(f)(**{**f.__dict__, "steps": steps})

    early, late = at("GS451", 10), at("GS451", 90)
    spike = at("GS403", 50)
    (_, linked) = causes.link(run, [spike, early])
    assert (linked.explained_by, linked.lead) == ("GS451:loss", 40)
    assert all(f.explained_by is None for f in causes.link(run, [spike, late]))
    layer_met, layer_missed = at("GS450", 50), at("GS450", 51)
    assert causes.link(run, [spike, layer_met])[1].explained_by == "GS450:loss"
    assert all(f.explained_by is None for f in causes.link(run, [spike, layer_missed]))


def test_a_cause_must_explain_something():
    with pytest.raises(ValueError, match="explains_when without explains"):
        rule(
            "GS498",
            "timing-only",
            Severity.INFO,
            "spike",
            Stage.WATCH,
            "x",
            example="x",
            fix="x",
            explains_when=When.BEFORE,
        )


def test_every_mark_is_a_watch_rules_with_its_own_symbol():
    from gradscope.findings import MARKS
    from gradscope.report.watch_marks import marked

    assert {"GS401", "GS402", "GS403", "GS406"} <= set(MARKS) <= set(declared(Stage.WATCH))
    symbols = [m.symbol for m in MARKS.values()]
    assert len(set(symbols)) == len(symbols) and all(len(s) == 1 for s in symbols)
    assert [(r, label) for r, label, _ in marked()] == [
        (r, f"{r} {m.label}") for r, m in MARKS.items()
    ]


def test_a_check_that_takes_this_gets_its_declared_rule():
    """`this: Rule = DECLARED` in a check's source is its own Rule once declared, so its
    findings carry the declaration's id and severity without naming them again."""
    from gradscope.rules import registry

    taking = 0
    for stage in Stage:
        for rid, check in registry.in_declared_order(stage).items():
            this = (check.__kwdefaults__ or {}).get("this")
            if this is not None:
                taking += 1
                assert this is RULES[rid] and this is not registry.DECLARED, rid
    assert taking >= 30  # the per-run and watch checks that make their own findings
    from gradscope.rules.memory import graph_retained

    assert graph_retained.__kwdefaults__["this"].id == "GS301"
