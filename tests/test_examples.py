"""Every built-in example triggers exactly its pathology, on the exact parameters."""

from __future__ import annotations

import pytest

from gradscope.api import inspect_target
from gradscope.examples import EXAMPLES


def by_rule(report):
    out: dict[str, list[str]] = {}
    for f in report.findings:
        out.setdefault(f.slug, []).append(f.subject)
    return out


@pytest.mark.parametrize("name", ["healthy-mlp", "tiny-transformer", "cnn", "rnn"])
def test_healthy_examples_have_no_findings(name):
    report = inspect_target(name)
    assert report.findings == []
    assert all(report.status(p) == "ok" for p in report.stats.params)


def test_unused_submodule():
    report = inspect_target("unused-submodule")
    assert by_rule(report) == {"none-grad": ["aux_head.weight", "aux_head.bias"]}
    assert all("never ran" in f.message for f in report.findings)


def test_frozen_layers():
    report = inspect_target("frozen-layers")
    assert by_rule(report) == {"frozen": ["backbone"]}
    assert report.findings[0].value == 4


def test_detached_middle_names_the_detach_line():
    report = inspect_target("detached-middle")
    assert by_rule(report) == {
        "none-grad": ["encoder.0.weight", "encoder.0.bias", "encoder.2.weight", "encoder.2.bias"]
    }
    source = open(EXAMPLES["detached-middle"].factory.__code__.co_filename).read().splitlines()
    (evidence,) = report.findings[0].evidence
    assert "`detach`" in evidence
    line = int(evidence.split("models.py:")[1].split(":")[0].split(" ")[0])
    assert ".detach()" in source[line - 1]


def test_vanishing_sigmoid():
    report = inspect_target("vanishing-sigmoid")
    found = by_rule(report)
    assert set(found) == {"vanishing"}
    assert found["vanishing"][:2] == ["0.weight", "0.bias"]
    assert "sigmoid" in report.findings[0].evidence[0]


def test_exploding_deep():
    report = inspect_target("exploding-deep")
    found = by_rule(report)
    assert set(found) == {"exploding"}
    weights = [f"{i}.weight" for i in range(0, 48, 2)]
    assert set(weights) <= set(found["exploding"])
    assert "activation RMS goes from" in report.findings[0].evidence[0]


def test_nan_loss_points_at_the_log():
    report = inspect_target("nan-loss")
    assert by_rule(report) == {
        "non-finite-loss": ["loss"],
        "non-finite-grad": ["fc.weight", "fc.bias"],
    }
    assert "`log`" in report.findings[0].evidence[0]


def test_dead_relu():
    report = inspect_target("dead-relu")
    assert by_rule(report) == {
        "zero-grad": ["0.weight", "0.bias", "2.weight", "2.bias", "4.weight"]
    }
    assert "`relu`" in report.findings[0].evidence[0]


def test_every_example_is_covered_and_its_expectation_holds():
    for name, example in EXAMPLES.items():
        expected = {s.strip() for s in example.expect.split(",") if s.strip()}
        assert set(by_rule(inspect_target(name, explain=False))) == expected, name


def test_explanation_that_cannot_replay_says_so():
    """A forward that only works once: the finding stays, with the reason it has no location."""
    import torch
    from torch import nn

    import gradscope

    class OneShot(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc, self.dec, self.calls = nn.Linear(3, 3), nn.Linear(3, 1), 0

        def forward(self, x):
            self.calls += 1
            if self.calls > 1:
                raise RuntimeError("data loader exhausted")
            return self.dec(self.enc(x).detach()).sum()

    report = gradscope.inspect(OneShot(), torch.randn(2, 3))
    (f, _) = [f for f in report.findings if f.slug == "none-grad"]
    assert f.evidence == (
        "could not locate it: replaying the forward raised RuntimeError: data loader exhausted",
    )
