"""The Python API does what each command does, by the command's name: gradcheck, graph and
inspect's plot, each giving the result whose outcome the command writes."""

from __future__ import annotations

import pytest

from gradscope import api
from gradscope.report import outputs
from gradscope.report.console import View


def test_gradcheck_judges_a_wrong_backward():
    report = api.gradcheck(["gradscope.examples.functions:SquareMissingFactor"])
    assert not report.passed
    outcome = report.outcome()
    assert outcome.kind == "gradcheck" and {f.rule for f in outcome.findings} == {"GS201"}
    document = outcome.to_dict()
    assert document["label"] == "gradscope.examples.functions:SquareMissingFactor"
    assert document["command"] == "gradcheck" and document["passed"] is False


def test_gradcheck_takes_typed_options():
    report = api.gradcheck(
        ["gradscope.examples.functions:CustomReLU"], shape={"input": (3, 5)}, seed=3, dtype="double"
    )
    assert report.passed and report.targets[0].inputs[0].shape == (3, 5)


def test_graph_returns_dot_named_and_coloured_without_a_file():
    result = api.graph("nan-loss")
    assert result.path is None and result.picture.startswith(b"digraph")
    assert b"fc.weight" in result.picture
    outcome = result.outcome()
    assert outcome.kind == "graph"  # the probe's findings, as inspect judges them
    assert "GS102" in {f.rule for f in outcome.findings}
    assert outputs.terminal(outcome, View()).startswith("gradscope: graph: ")


def test_graph_writes_the_file_it_is_given(tmp_path):
    out = tmp_path / "g.dot"
    result = api.graph("healthy-mlp", output=str(out), probe=False)
    assert result.path == str(out) and out.read_text().startswith("digraph")
    assert result.outcome().to_dict()["output"] == str(out)


def test_inspect_target_draws_the_gradient_flow(tmp_path):
    plot = tmp_path / "flow.svg"
    report = api.inspect_target("healthy-mlp", plot=str(plot))
    assert report.findings == [] and plot.read_text().lstrip().startswith("<?xml")


def test_every_result_has_its_own_terminal_view():
    report = api.inspect_target("healthy-mlp")
    text = outputs.terminal(report.outcome(), View())
    assert "verdict" in text


@pytest.mark.parametrize("bad", ["", 3])
def test_a_target_of_the_wrong_kind_is_one_line(bad):
    from gradscope.errors import TargetError

    with pytest.raises(TargetError, match="must be a non-empty string"):
        api.graph(bad)  # type: ignore[arg-type]
