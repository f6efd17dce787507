"""Every terminal renderer prints the user's text as it is: brackets kept, markup closing
tags harmless, control characters shown as escapes, long names whole. Each renderer gets
a real report (tests/report/renderings.py) naming a hostile string in its module or
parameter names, target or log paths, error message and notes."""

from __future__ import annotations

import re

import pytest
from renderings import RENDERERS, SAID

from gradscope.fmt import printable
from gradscope.report.console import View

HOSTILE = {
    "brackets": "[batch, 3]",
    "closing tag": "[/x]",
    "markup": "[bold red]x[/]",
    "escape": "\x1b[31m",
    "nul": "\x00",
    "surrogate": "\ud800",
    "long": "layer" + "n" * 295,
}
SGR = re.compile(r"\x1b\[[0-9;]*m")
"""The colour codes rich itself writes: removed before the text is read."""


def squash(text: str) -> str:
    """Without any whitespace: a sentence reads the same however it was wrapped."""
    return "".join(text.split())


@pytest.mark.parametrize("color", [False, True], ids=["plain", "color"])
@pytest.mark.parametrize("hostile", HOSTILE.values(), ids=HOSTILE.keys())
@pytest.mark.parametrize("renderer", RENDERERS)
def test_the_users_text_is_printed_as_it_is(renderer, hostile, color):
    text = RENDERERS[renderer](hostile, View(width=80, color=color))
    text = SGR.sub("", text) if color else text
    for sentence in SAID[renderer](printable(hostile)):
        assert squash(sentence) in squash(text), sentence
    assert "\x1b" not in text and "\x00" not in text and "\ud800" not in text


@pytest.mark.parametrize("hostile", HOSTILE.values(), ids=HOSTILE.keys())
def test_the_runs_parting_table_names_a_parameter_as_it_is(hostile):
    """A table cell is the user's text too: at a width where the table fits, the row of
    the parameter that parts first (at step 9) holds its name, nothing parsed."""
    text = SGR.sub("", RENDERERS["runs"](hostile, View(width=1000, color=True)))
    rows = [line.split(maxsplit=1) for line in text.splitlines()]
    assert ["9", f"{printable(hostile)}.weight"] in [
        [row[0], row[1].split("  ")[0]] for row in rows if len(row) == 2
    ]


def test_printable_shows_every_control_character_and_keeps_the_rest():
    assert printable("a\x1b[31mb\x00c\ud800d\x07") == "a\\x1b[31mb\\x00c\\ud800d\\x07"
    assert printable("[bold]x[/] é → ✓\n\t") == "[bold]x[/] é → ✓\n\t"
    assert printable(printable("\x1b")) == "\\x1b"
