"""inspect --plot: the gradient-flow picture, drawn from the report it accompanies."""

from __future__ import annotations

import struct

import pytest

from gradscope.cli import app


def _size(png: bytes) -> tuple[int, int]:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    return width, height


@pytest.mark.slow
def test_plot_marks_none_grads_and_colours_by_status(runner, tmp_path):
    out = tmp_path / "flow.png"
    result = runner.invoke(app, ["inspect", "detached-middle", "--plot", str(out)])
    assert result.exit_code == 1 and f"wrote {out}" in result.stderr
    width, height = _size(out.read_bytes())
    assert 500 <= width <= 1200 and 500 <= height <= 1000

    from gradscope.api import inspect_target
    from gradscope.report import flow_plot

    report = inspect_target("detached-middle")
    rows = flow_plot._rows(report)
    assert [r["status"] for r in rows] == ["none"] * 4 + ["ok"] * 4
    assert rows[0]["norm"] is None and rows[-1]["norm"] > 0
    svg = flow_plot.plot(report, "svg").decode()
    assert svg.count(">none<") == 0 or "none" in svg  # text kept as text
    assert "encoder.0.weight" in svg


@pytest.mark.slow
def test_many_tensors_become_one_bar_per_module(runner, tmp_path):
    from gradscope.api import inspect_target
    from gradscope.report import flow_plot

    report = inspect_target("deep-transformer")
    assert len(report.stats.params) > flow_plot.MOST_BARS
    rows = flow_plot._rows(report)
    assert len(rows) < len(report.stats.params)
    assert "blocks.0.attn.qkv" in {r["name"] for r in rows}
    width, _ = _size(flow_plot.plot(report))
    assert width <= 24 * 110


def test_plot_needs_a_picture_extension_and_a_writable_place(runner, tmp_path):
    result = runner.invoke(app, ["inspect", "healthy-mlp", "--plot", str(tmp_path / "f.txt")])
    assert result.exit_code == 2 and "give a .png, .svg or .pdf file" in result.stderr
    result = runner.invoke(app, ["inspect", "healthy-mlp", "--plot", str(tmp_path / "no/f.png")])
    assert result.exit_code == 2 and "does not exist" in result.stderr
