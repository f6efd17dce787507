"""A NaN made by the backward of eigh or svd is the eigenvectors' division by the gaps
between eigenvalues (repeated ones: a rank-deficient covariance, an isotropic matrix), not a
value a mask dropped: inspect and watch say so, with advice that fixes it (the values alone,
a basis-free projector, Newton-Schulz), not the torch.where or clamp that cannot. The same
layers on a matrix whose eigenvalues are distinct stay silent, and a sqrt at 0 keeps its
own words."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from gradscope.api.inspecting import inspect
from gradscope.config import Thresholds
from gradscope.rules.step_nan import backward_nan_origin
from gradscope.steps.nan_facts import BackwardNan
from gradscope.steps.records import ParamInfo, WatchRun
from tests.watcher.watch_scripts import step_record

torch.manual_seed(0)
X = torch.randn(32, 6, dtype=torch.float64)


class Whiten(nn.Module):
    """PCA whitening on the top eigenvectors of the features' covariance (or the left
    singular vectors of the centred features)."""

    def __init__(self, rank: int, how: str) -> None:
        super().__init__()
        self.lin = nn.Linear(6, 6, dtype=torch.float64)
        with torch.no_grad():
            self.lin.weight.copy_(torch.eye(6))
            self.lin.weight[rank:] = 0  # rows at 0: the covariance's rank is `rank`
            self.lin.bias.zero_()
        self.how = how

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.lin(x)
        h = h - h.mean(0)
        if self.how == "eigh":
            vectors = torch.linalg.eigh(h.T @ h / len(h)).eigenvectors[:, -2:]
        else:
            vectors = torch.linalg.svd(h.T, full_matrices=False).U[:, :2]
        return h @ vectors


def _evidence(model: nn.Module) -> str | None:
    report = inspect(model, X, lambda out: out.pow(2).sum())
    found = [f for f in report.findings if f.slug == "non-finite-grad"]
    return " ".join(found[0].evidence) if found else None


@pytest.mark.parametrize(
    ("how", "node", "values"),
    [("eigh", "LinalgEighBackward0", "eigenvalues"), ("svd", "LinalgSvdBackward0", "singular")],
)
def test_repeated_eigenvalues_are_named_as_the_gap_division(how, node, values):
    text = _evidence(Whiten(3, how))
    assert text is not None
    assert f"({node}) made the first non-finite gradient from finite ones" in text, text
    assert f"divides by the gaps between {values}" in text
    assert "test_spectral_gaps.py:" in text  # the forward line of the decomposition
    assert "Newton-Schulz" in text and "A + eps·I" in text
    assert "torch.where(mask, x, 1)" not in text and "clamp the input" not in text


@pytest.mark.parametrize("how", ["eigh", "svd"])
def test_distinct_eigenvalues_are_said_nothing(how):
    assert _evidence(Whiten(6, how)) is None


def _run(op: str) -> WatchRun:
    params = (ParamInfo("lin.weight", (6, 6), True, True, 0.1),)
    origin = BackwardNan(seen=1, step=2, op=op, params=("lin.weight",), masked=True, passed=3)
    steps = [step_record(1), step_record(2)]
    return WatchRun("t", params, steps, "completed", 1.0, backward_nan=origin)


def test_watch_names_the_gap_division_of_an_eigh_backward():
    (found,) = backward_nan_origin(_run("LinalgEighBackward0"), Thresholds())
    assert "divides by the gaps between eigenvalues" in found.message
    assert found.advice.startswith("make the loss depend on the decomposition only")
    assert "eigvalsh" in found.advice and "torch.where" not in found.advice


def test_watch_keeps_the_masked_words_for_any_other_op():
    (found,) = backward_nan_origin(_run("LogBackward0"), Thresholds())
    assert "gaps" not in found.message and "torch.where(mask, x, 1)" in found.advice
