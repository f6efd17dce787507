"""The terminal table at fixed widths: status always visible, names cut in the middle,
the least useful columns dropped first, user text never read as markup."""

from __future__ import annotations

from fabricated import param, stats

from gradscope import rules
from gradscope.inspector.results import Report
from gradscope.report import terminal
from gradscope.report.console import View

LONG = "encoder.layers.11.self_attention.in_projection_with_bias.weight"


def _report(*params, **kw) -> Report:
    run = stats(*params, **kw)
    return Report("t.py:build", run, rules.diagnose(run), {}, "2.x")


def _table(text: str) -> list[str]:
    """The table's lines from its head on, without the indent every table has."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("  parameter"))
    return [line.removeprefix("  ") for line in lines[start:]]


def test_80_columns_keeps_status_and_drops_dtype_then_shape():
    report = _report(param(LONG, 0.5), param("head.weight", None), ran=("encoder",))
    text = terminal.render(report, View(width=80))
    table = _table(text)
    assert table[0].split() == [
        "parameter",
        "grad",
        "norm",
        "max",
        "|grad|",
        "grad/weight",
        "zeros",
        "status",
    ]
    assert all(len(line) <= 80 for line in text.splitlines())
    long_row = next(line for line in table if line.startswith("encoder.l"))
    assert "…" in long_row and long_row.split()[0].endswith("bias.weight")
    assert long_row.rstrip().endswith("ok")
    assert next(line for line in table if line.startswith("head.weight")).endswith("none")
    assert "shape, dtype left out at 80 columns" in text


def test_120_columns_has_every_column_and_whole_names():
    name = "encoder.layers.11.self_attention.in_proj.weight"
    report = _report(param(name, 0.5), param("head.weight", 0.2))
    table = _table(terminal.render(report, View(width=120)))
    assert table[0].split()[:4] == ["parameter", "shape", "dtype", "grad"]
    assert table[1].startswith(name + "  ")
    assert all(len(line) <= 120 for line in table)


def test_dtype_and_shape_make_way_for_a_whole_name_before_it_is_cut():
    table = _table(terminal.render(_report(param(LONG, 0.5)), View(width=120)))
    assert "dtype" not in table[0] and table[1].startswith(LONG + "  ")


def test_zero_fraction_is_never_rounded_to_all_or_nothing():
    assert terminal.zeros_text(0.999) == ">99%"
    assert terminal.zeros_text(0.001) == "<1%"
    assert terminal.zeros_text(1.0) == "100%" and terminal.zeros_text(0.0) == "0%"
    assert terminal.zeros_text(0.5) == "50%"


def test_names_with_brackets_and_control_characters_are_printed_as_they_are():
    names = ["heads.[bold]tok", "[CLS]", "emb.[/]", "bad\x1b[31mname"]
    report = _report(*[param(n, 0.1) for n in names])
    text = terminal.render(report, View(width=120, color=True))
    for n in names[:3]:
        assert n in text
    assert "bad\\x1b[31mname" in text and "\x1b[31mname" not in text


def test_ignored_findings_are_counted_and_their_rows_marked(tmp_path):
    from gradscope.config import load

    (tmp_path / "gs.toml").write_text('ignore = ["none-grad:aux.*"]')
    run = stats(
        param("body.weight"), param("aux.weight", None), param("aux.bias", None), ran=("body",)
    )
    report = Report("t", run, rules.diagnose(run, load(str(tmp_path / "gs.toml"))), {}, "")
    assert report.findings == [] and len(report.ignored) == 2
    text = terminal.render(report, View(width=100))
    assert "2 ignored (none-grad:aux.* x2)" in text
    assert "aux.weight*" in text and "body.weight*" not in text
    assert "verdict: OK  (0 errors, 0 warnings, 0 info, 2 ignored)" in text
    assert report.to_dict()["ignored"][0]["ignored_by"] == "none-grad:aux.*"
