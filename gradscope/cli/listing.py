"""`gradscope examples` and `gradscope rules`: what can be run, and what each finding means."""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, Annotated

import typer

from gradscope import findings
from gradscope.cli import common as clikit
from gradscope.errors import ExitCode
from gradscope.examples import EXAMPLES
from gradscope.report.console import view_for
from gradscope.rule_docs import STAGES, doc_of
from gradscope.suggest import did_you_mean
from gradscope.troubleshooting import TABLE

if TYPE_CHECKING:
    from gradscope.findings import Rule


NBSP = "\N{NO-BREAK SPACE}"


def examples(width: clikit.WidthOpt = None) -> None:
    """List the built-in examples, runnable by name: gradscope inspect NAME."""

    columns = view_for(None, width).width
    for e in EXAMPLES.values():
        # the tag stays whole: its space is one textwrap does not break at
        expect = f"  [expect:{NBSP}{e.expect}]" if e.expect else "  [healthy]"
        lines = textwrap.wrap(
            f"{e.name:18} {e.summary}{expect}",
            columns,
            subsequent_indent=" " * 19,
            break_long_words=False,
            break_on_hyphens=False,
        )
        typer.echo("\n".join(lines).replace(NBSP, " "))


def rules(
    rule: Annotated[
        str | None,
        typer.Argument(
            metavar="RULE",
            help="A rule id (GS104) or slug (exploding): why it fires, an example and the fix. "
            "All rules, one line each, when omitted.",
        ),
    ] = None,
    width: clikit.WidthOpt = None,
) -> None:
    """Explain gradscope's rules: id, slug, default severity and what each finds."""

    columns = view_for(None, width).width
    if rule is None:
        ordered = sorted(findings.RULES.values(), key=lambda r: r.id)
        typer.echo("\n".join(rule_list(ordered, columns)))
        return
    found = findings.lookup(rule)
    if found is None:
        names = [n for r in findings.RULES.values() for n in (r.id, r.slug)]
        clikit.error(f"unknown rule {rule!r} (see `gradscope rules`){did_you_mean(rule, names)}")
        raise typer.Exit(ExitCode.ERROR)
    typer.echo("\n".join(rule_page(found, columns)))


SUMMARY_MIN = 40
"""Columns the summary needs to sit in its own column; narrower, it wraps under the id."""


def rule_list(chosen: list[Rule], width: int) -> list[str]:
    """One rule a line: id, slug and severity in columns, the summary wrapped beside them."""
    slug = max(len(r.slug) for r in chosen)
    column = 5 + 2 + slug + 2 + len("warning") + 2
    indent = column if width - column >= SUMMARY_MIN else 6
    out = []
    for r in chosen:
        head = f"{r.id}  {r.slug:<{slug}}  {r.severity!s:<7}  "
        if indent < column:
            head = f"{r.id} {r.slug} ({r.severity}) "
        out += textwrap.wrap(
            r.summary,
            width,
            initial_indent=head,
            subsequent_indent=" " * indent,
            break_long_words=False,
            break_on_hyphens=False,
        )
    out.append("")
    out += _wrap(
        "gradscope rules RULE explains one rule: why it fires, an example and the fix "
        "(docs/rules.md).",
        width,
    )
    return out


def rule_page(r: Rule, width: int) -> list[str]:
    """One rule in full: where it comes from, its table row, why it fires, example, fix."""

    row, doc = TABLE[r.row], doc_of(r)
    out = [f"{r.id} {r.slug} · {r.severity} by default"]
    out += _wrap(r.summary, width, "  ")
    for label, text in (
        ("stage", STAGES.get(r.source, r.source)),
        ("symptom", row.symptom),
        ("cause", row.cause),
        ("remedy", row.remedy),
    ):
        out += _wrap(text, width, f"{label:<10}", " " * 10)
    if doc is not None:
        out += ["", "Why it fires", *_wrap(doc.why, width, "  ")]
        if doc.thresholds:
            out += _wrap(
                "thresholds: " + ", ".join(doc.thresholds) + " ([tool.gradscope.thresholds], "
                "configs/default.toml)",
                width,
                "  ",
            )
        if doc.objectives:
            out += ["", "Objectives judged", *_wrap(doc.objectives, width, "  ")]
        out += ["", "Example", *_wrap(doc.example, width, "  ")]
        if doc.command:
            out += _wrap(doc.command, width, "  $ ", "      ")
        out += ["", "Fix", *_wrap(doc.fix, width, "  ")]
    out += [
        "",
        "Settings (docs/config.md)",
        f'  [tool.gradscope.severity] {r.slug} = "warning"',
        f'  ignore = ["{r.slug}:GLOB"]',
    ]
    return out


def _wrap(text: str, width: int, first: str = "", rest: str | None = None) -> list[str]:
    return textwrap.wrap(
        text,
        width,
        initial_indent=first,
        subsequent_indent=first if rest is None else rest,
        break_long_words=False,
        break_on_hyphens=False,
    )
