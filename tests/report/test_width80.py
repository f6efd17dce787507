"""Every terminal report fits 80 columns, and 40 (the floor): no line is wider, every line
a paragraph wraps onto is indented under its start, and the words a reader looks for
(gradcheck's diagnoses, rule slugs, verdicts) are never cut. Real reports of each
renderer from tests/report/renderings.py, on a long but ordinary module name."""

from __future__ import annotations

import io

import pytest
from renderings import RENDERERS
from rich.cells import cell_len
from rich.console import Console

from gradscope.report import grid, layout
from gradscope.report.console import View
from gradscope.report.text import styled

NAME = "attention_in_projection_with_bias"
WIDTHS = [80, 40]
KEY_WORDS = {
    "inspect": ["GS101", "none-grad", "verdict: ERROR"],
    "check": ["none-grad", "COULD NOT RUN", "ValueError:"],
    "watch": ["GS411", "not-in-optimizer", "verdict: CRASHED"],
    "gradcheck": [
        "not-scaled-by-grad-output",
        "backward-error",
        "inplace-saved",
        "verdict: FAIL",
    ],
    "diff": ["GS601", "output-differs", "verdict: DIFFER"],
    "runs": ["GS607", "runs-diverge", "GS608", "run-did-not-train", "verdict: DIFFER"],
}


def render(renderer: str, width: int) -> list[str]:
    return RENDERERS[renderer](NAME, View(width=width)).rstrip("\n").split("\n")


def starts(lines: list[str]) -> list[str]:
    """The lines at column 0: where a report's sections and paragraphs begin."""
    return [line for line in lines if line and not line.startswith(" ")]


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("renderer", RENDERERS)
def test_no_line_is_wider_than_the_console(renderer, width):
    lines = render(renderer, width)
    assert max(cell_len(line) for line in lines) <= width
    assert not any(line.endswith(" ") for line in lines)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("renderer", RENDERERS)
def test_wrapped_lines_are_indented(renderer, width):
    """Wrapping starts no line at column 0: the same lines start there as on a console
    wide enough to wrap nothing, each the beginning of its unwrapped self."""
    narrow, wide = starts(render(renderer, width)), starts(render(renderer, 1000))
    assert len(narrow) == len(wide), "\n".join(narrow)
    for cut, whole in zip(narrow, wide, strict=True):
        assert whole.startswith(cut.rstrip()), (cut, whole)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("renderer", RENDERERS)
def test_key_words_are_whole(renderer, width):
    lines = render(renderer, width)
    for word in KEY_WORDS[renderer]:
        assert any(word in line for line in lines), word
    if renderer == "gradcheck":  # its table cut its own diagnoses: "constan…"
        assert not any("…" in line for line in lines)


def _console(width: int) -> Console:
    return Console(file=io.StringIO(), width=width, color_system=None)


def _printed(console: Console) -> list[str]:
    return console.file.getvalue().rstrip("\n").split("\n")  # type: ignore[attr-defined]


def test_paragraph_wraps_at_words_with_a_hanging_indent():
    console = _console(30)
    text = styled("advice: ", "find the .detach() between the encoder and the loss")
    layout.paragraph(console, text, indent=4, hang=2)
    assert _printed(console) == [
        "    advice: find the .detach()",
        "      between the encoder and",
        "      the loss",
    ]


def test_paragraph_folds_only_a_word_wider_than_a_line():
    console = _console(24)
    layout.paragraph(console, styled("name " + "n" * 30 + " ok"), indent=2, hang=2)
    assert _printed(console) == [
        "  name",
        "    nnnnnnnnnnnnnnnnnnnn",
        "    nnnnnnnnnn ok",
    ]


def test_grid_is_a_table_when_it_fits_and_a_list_when_not():
    columns = [grid.Column("check"), grid.Column("max abs", right=True), grid.Column("why")]
    rows = [["backward", "2.31", "constant-factor"], ["forward-ad", "1", "sign-flip"]]
    wide = _console(60)
    grid.grid(wide, columns, rows)
    assert _printed(wide) == [
        "  check       max abs  why",
        "  backward       2.31  constant-factor",
        "  forward-ad        1  sign-flip",
    ]
    narrow = _console(30)
    grid.grid(narrow, columns, rows)
    assert _printed(narrow) == [
        "  backward",
        "      max abs 2.31 · why",
        "        constant-factor",
        "  forward-ad",
        "      max abs 1 · why",
        "        sign-flip",
    ]
