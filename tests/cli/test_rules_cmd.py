"""`gradscope rules`: every rule on a line of its own at the terminal's width, and one rule
in full (why it fires, an example, the fix), never wider than the terminal."""

from __future__ import annotations

import re

import pytest

from gradscope.cli import app
from gradscope.findings import RULES
from gradscope.rule_docs import DOCS
from gradscope.troubleshooting import TABLE

ORDERED = sorted(RULES.values(), key=lambda r: r.id)


def rules(runner, *args: str, columns: int = 80) -> list[str]:
    result = runner.invoke(app, ["rules", *args], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


def test_the_list_fits_80_columns_one_rule_a_line(runner):
    lines = rules(runner)
    assert [line for line in lines if len(line) > 80] == []
    heads = [line for line in lines if re.match(r"GS\d{3} ", line)]
    assert [h.split()[:3] for h in heads] == [[r.id, r.slug, str(r.severity)] for r in ORDERED]
    # a summary too long for its line goes on under its own column, whole words only
    body = "\n".join(lines[: lines.index("")])
    for r in ORDERED:
        block = body.split(r.id, 1)[1].split("\nGS", 1)[0]
        assert " ".join(block.split()[2:]) == r.summary, r.id
    continued = [line for line in lines[: lines.index("")] if not line.startswith("GS")]
    assert continued and all(line.startswith(" " * 20) for line in continued)
    assert "gradscope rules RULE" in lines[-1] + lines[-2]


def test_a_wider_terminal_or_width_gets_fewer_lines(runner):
    narrow = rules(runner, columns=80)
    wide = rules(runner, columns=200)
    assert len(wide) < len(narrow) and max(len(line) for line in wide) > 80
    flag = runner.invoke(app, ["rules", "--width", "60"], env={"COLUMNS": "200"}).stdout
    assert max(len(line) for line in flag.splitlines()) <= 60
    # too narrow for a summary column: the summary wraps under the id instead
    assert re.search(r"^GS104 exploding \(error\) a gradient", flag, re.M)


def test_one_rule_in_full(runner):
    lines = rules(runner, "GS104")
    text = "\n".join(lines)
    assert [line for line in lines if len(line) > 80] == []
    assert lines[0] == "GS104 exploding · error by default"
    row = TABLE["exploding"]
    flat = " ".join(text.split())
    for words in (row.symptom, row.cause, row.remedy, "gradscope inspect: one forward"):
        assert words in flat
    assert "Why it fires" in lines and "Example" in lines and "Fix" in lines
    for key in ("explode-rms", "explode-median-ratio", "explode-min-norm", "explode-norm"):
        assert key in flat
    assert "  $ gradscope inspect exploding-deep" in lines
    assert " ".join(DOCS["GS104"].fix.split()) in flat
    assert lines[-2:] == [
        '  [tool.gradscope.severity] exploding = "warning"',
        '  ignore = ["exploding:GLOB"]',
    ]


def test_a_rule_by_slug_is_the_same_page(runner):
    assert rules(runner, "vanishing") == rules(runner, "GS105")
    assert rules(runner, "gs105") == rules(runner, "GS105")


@pytest.mark.parametrize("rule", [r.id for r in ORDERED])
def test_every_rule_page_fits_80_columns_and_says_why(runner, rule):
    lines = rules(runner, rule)
    assert [line for line in lines if len(line) > 80] == [], rule
    assert "Why it fires" in lines and "Fix" in lines


def test_a_rule_page_says_which_objectives_it_judges(runner):
    lines = rules(runner, "GS415")
    at = lines.index("Objectives judged")
    said = " ".join(line.strip() for line in lines[at + 1 : lines.index("Example")]).strip()
    assert said == " ".join(DOCS["GS415"].objectives.split())


def test_an_unknown_rule_is_exit_2(runner):
    result = runner.invoke(app, ["rules", "GS999"])
    assert result.exit_code == 2 and "unknown rule 'GS999'" in result.stderr
