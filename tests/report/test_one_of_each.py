"""One name, one thing: one `Column` (report/grid.py: every table's, the inspect table's
too), one `Watcher` (the watch context), and one table of the colour a severity, verdict or
status word is drawn in (report/layout.STYLE)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from gradscope.report import grid, layout, terminal

PACKAGE = Path(layout.__file__).resolve().parent.parent
RICH_STYLE = re.compile(r"(bold )?(red|green|yellow|magenta|cyan|blue|dim)")


def _classes(name: str) -> list[str]:
    return sorted(
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef) and node.name == name
    )


def test_one_column_and_one_watcher_in_the_package():
    assert _classes("Column") == ["report/grid.py"]
    assert _classes("Watcher") == ["watcher/session.py"]
    assert all(isinstance(c, grid.Column) for c in terminal.COLUMNS)


def _style_tables(source: str) -> list[int]:
    """The lines of dict displays mapping two or more words to rich styles (a style alone,
    or in a (word, style) pair)."""

    def styles(value: ast.expr) -> bool:
        parts = value.elts if isinstance(value, ast.Tuple) else [value]
        return any(
            isinstance(p, ast.Constant)
            and isinstance(p.value, str)
            and RICH_STYLE.fullmatch(p.value)
            for p in parts
        )

    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Dict) and sum(styles(v) for v in node.values) >= 2
    ]


def test_one_table_of_status_colours():
    """Pictures (the *_plot.py, matplotlib's colours) draw in a medium of their own."""
    tables = {
        path.name: lines
        for path in (PACKAGE / "report").glob("*.py")
        if not path.name.endswith("_plot.py")
        if (lines := _style_tables(path.read_text()))
    }
    assert list(tables) == ["layout.py"] and len(tables["layout.py"]) == 1


def test_the_table_finder_sees_a_table_in_either_shape():
    assert _style_tables('A = {"PASS": "bold green", "FAIL": "bold red"}') == [1]
    assert _style_tables('T = {True: ("yes", "bold green"), False: ("NO", "red")}') == [1]
    assert _style_tables('D = {"x": "one", "y": "two", "ok": "green"}') == []


def test_every_word_keeps_its_colour():
    """What the four tables said before they were one: a severity, a verdict (a severity
    in capitals is the severity's), a check target's state, a parameter's status, whether
    a run trained."""
    said = {
        "error": "bold red",
        "warning": "yellow",
        "info": "cyan",
        "ERROR": "bold red",
        "WARNING": "yellow",
        "OK": "bold green",
        "PASS": "bold green",
        "FAIL": "bold red",
        "COULD NOT RUN": "bold magenta",
        "ok": "green",
        "frozen": "dim",
        "none": "bold red",
        "non-finite": "bold red",
        "exploding": "red",
        "vanishing": "yellow",
        "zero": "yellow",
        "yes": "bold green",
        "NO": "bold red",
        "?": "bold yellow",
    }
    assert {word: layout.style_of(word) for word in said} == said
    assert layout.style_of("CRASHED") == "" and layout.style_of("CRASHED", "x") == "x"
