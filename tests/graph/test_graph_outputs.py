"""`gradscope graph` takes every TARGET `inspect` takes (a model class without a batch
too), and writes its findings as the common JSON document."""

from __future__ import annotations

import json
import textwrap

import pytest

from gradscope import api
from gradscope.cli import app
from gradscope.errors import TargetError

CONVNET = textwrap.dedent(
    """\
    from torch import nn

    class ConvNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3)
            self.head = nn.Linear(4, 2)

        def forward(self, x):
            return self.head(self.conv(x).mean((2, 3)))
    """
)
NEEDS_ARGS = textwrap.dedent(
    """\
    from torch import nn

    class Net(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.fc = nn.Linear(width, 2)

        def forward(self, x):
            return self.fc(x)
    """
)


@pytest.fixture
def models(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "convnet.py").write_text(CONVNET)
    (tmp_path / "needs_args.py").write_text(NEEDS_ARGS)
    return tmp_path


@pytest.mark.parametrize("spec", ["convnet.py", "convnet.py:ConvNet"])
def test_graph_builds_a_model_class_as_inspect_does(runner, models, spec):
    inspected = runner.invoke(app, ["inspect", spec, "-f", "json"])
    drawn = runner.invoke(app, ["graph", spec, "--format", "dot"])
    assert inspected.exit_code == 0 and drawn.exit_code == 0, drawn.output
    assert "conv.weight" in drawn.stdout and drawn.stdout.startswith("digraph")
    note = [line for line in inspected.stderr.splitlines() if "torch.randn(2, 3, 32, 32)" in line]
    assert note and note[0] in drawn.stderr  # the same note: the same resolution
    assert json.loads(inspected.stdout)["label"] == api.graph(spec).label


def test_graph_refuses_what_inspect_refuses_with_the_same_line(runner, models):
    inspected = runner.invoke(app, ["inspect", "needs_args.py"])
    drawn = runner.invoke(app, ["graph", "needs_args.py", "--format", "dot"])
    assert inspected.exit_code == drawn.exit_code == 2
    assert "def gradscope_target():" in drawn.stderr
    assert drawn.stderr == inspected.stderr
    with pytest.raises(TargetError, match="needs arguments"):
        api.graph("needs_args.py")


def header(document: dict) -> list[str]:
    return list(document)[:6]


def test_graph_writes_its_findings_and_cuts_as_json(runner, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no Graphviz: JSON needs none
    out = tmp_path / "g.json"
    result = runner.invoke(app, ["graph", "detached-middle", "-o", str(out)])
    assert result.exit_code == 0, result.output
    document = json.loads(out.read_text())
    inspected = json.loads(runner.invoke(app, ["inspect", "detached-middle", "-f", "json"]).stdout)
    assert header(document) == header(inspected)  # the common header
    assert document["kind"] == "graph" and document["version"] == inspected["version"]
    assert {f["rule"] for f in document["findings"]} == {"GS101"}
    said = [(f["subject"], f["message"], f["severity"]) for f in document["findings"]]
    assert said == [(f["subject"], f["message"], f["severity"]) for f in inspected["findings"]]
    assert len(document["cuts"]) == 1 and document["cuts"][0].startswith(".detach() at ")
    assert document["parameters"]["encoder.0.weight"] == "none"
    assert document["parameters"]["decoder.2.weight"] == "ok"
    assert document["output"] == str(out) and document["format"] == "json"


def test_graph_json_goes_to_stdout_and_without_a_probe(runner):
    result = runner.invoke(app, ["graph", "healthy-mlp", "--format", "json", "--no-probe"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["findings"] == [] and document["parameters"] is None
    assert document["cuts"] == [] and document["output"] is None and document["nodes"] > 0


def test_an_unknown_extension_still_names_json(runner, tmp_path):
    result = runner.invoke(app, ["graph", "healthy-mlp", "-o", str(tmp_path / "g.yaml")])
    assert result.exit_code == 2 and ".json" in result.stderr
