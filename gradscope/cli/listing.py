"""`gradscope examples` and `gradscope rules`: what can be run, and what each finding means."""

from __future__ import annotations

from typing import Annotated

import typer

from gradscope.cli import common as clikit
from gradscope.errors import ExitCode
from gradscope.examples import EXAMPLES


def examples() -> None:
    """List the built-in examples, runnable by name: gradscope inspect NAME."""
    for e in EXAMPLES.values():
        expect = f"  [expect: {e.expect}]" if e.expect else "  [healthy]"
        typer.echo(f"{e.name:18} {e.summary}{expect}")


def rules(
    rule: Annotated[
        str | None,
        typer.Argument(
            metavar="RULE", help="A rule id (GS101) or slug (none-grad); all rules when omitted."
        ),
    ] = None,
) -> None:
    """Explain gradscope's rules: id, slug, default severity and troubleshooting-table row."""
    from gradscope import findings as rules_mod

    chosen = sorted(rules_mod.RULES.values(), key=lambda r: r.id)
    if rule:
        found = rules_mod.lookup(rule)
        if found is None:
            clikit.error(f"unknown rule {rule!r} (see `gradscope rules`)")
            raise typer.Exit(ExitCode.ERROR)
        chosen = [found]
    for r in chosen:
        row = rules_mod.TABLE[r.row]
        typer.echo(
            f"{r.id} {r.slug} ({r.severity}): {r.summary}\n"
            f"    table: {row.symptom} | {row.cause} | {row.remedy}"
        )
