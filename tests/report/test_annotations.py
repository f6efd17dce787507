"""GitHub annotations: one per problem, on the file and line its evidence names."""

from __future__ import annotations

from dataclasses import replace

from gradscope.findings import RULES, Finding
from gradscope.outcome import CheckReport, Outcome
from gradscope.report import annotations


def _none_grad(subject: str, evidence: tuple[str, ...] = ()) -> Finding:
    f = RULES["GS101"].finding(subject, f"grad of {subject} is None", "fix it")
    return replace(f, evidence=evidence)


def _lines(*outcomes: Outcome) -> list[str]:
    return annotations.render(CheckReport(list(outcomes), None)).splitlines()


def test_one_annotation_per_problem_on_the_line_its_evidence_names():
    cut = ("graph cut by .detach(): `detach` at lib/helpers.py:10 in `enc`",)
    r = Outcome(
        "inspect",
        "model.py:build",
        [_none_grad("enc.weight", cut), _none_grad("enc.bias", cut), _none_grad("aux.weight")],
        file="model.py",
    )
    first, second = _lines(r)
    assert first.startswith(
        "::error file=lib/helpers.py,line=10,title=gradscope GS101 none-grad in model.py%3Abuild"
        "::2 subjects: enc.weight, enc.bias; e.g. grad of enc.weight is None — fix it"
    )
    assert second.startswith("::error file=model.py,title=") and "line=" not in second


def test_a_location_in_the_message_or_the_error_and_none_at_all():
    f = RULES["GS101"].finding("w", "grad of w is None: cut at src/my-net_2.py:7", "fix it")
    assert _lines(Outcome("inspect", "t", [f], file="t.py"))[0].startswith(
        "::error file=src/my-net_2.py,line=7,title="
    )
    broken = Outcome(
        "inspect",
        "t.py:build",
        could_not_run="t.py:2: t.py:build() raised ValueError: boom",
        file="t.py",
    )
    assert _lines(broken)[0].startswith("::error file=t.py,line=2,title=gradscope could not run")
    lost = Outcome("inspect", "t.py:build", could_not_run="t.py: no such file", file="t.py")
    assert _lines(lost)[0].startswith("::error file=t.py,title=")
    # a line number that is not a file's, or no file at all: no location made up
    g = RULES["GS101"].finding("w", "grad of w is None: 12.5:3 ratio", "fix it")
    assert _lines(Outcome("inspect", "healthy-mlp", [g]))[0].startswith("::error title=")
