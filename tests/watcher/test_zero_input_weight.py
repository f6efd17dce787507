"""GS413 on a weight whose layer's input is 0 at every step while its bias learns:
gluonts' TemporalFusionTransformerEstimator fills a missing feat_static_real with [0.0]
(gluonts/torch/model/tft/estimator.py, SetField) and projects it by a Linear
(FeatureProjector in gluonts/torch/model/tft/layers.py), so that Linear's weight gets exact
zeros by construction. Information, said as that; a layer whose output the loss never
reads, and a dead layer before the projector (its own tensors starve too), still warn."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import gradscope
from gradscope.findings import Severity


def _never_updated(case: str) -> dict[str, Severity]:
    torch.manual_seed(0)
    pre, project = nn.Linear(3, 1), nn.Linear(1, 4)
    encoder, head = nn.Linear(5, 4), nn.Linear(4, 1)
    parts = {"project": project, "encoder": encoder, "head": head}
    model = nn.ModuleDict(parts if case == "placeholder" else {"pre": pre, **parts})
    if case == "dead":
        nn.init.constant_(pre.bias, -100.0)
    opt = torch.optim.Adam(model.parameters(), 1e-2)
    x, y, real = torch.randn(16, 5), torch.randn(16, 1), torch.randn(16, 3)
    with gradscope.watch() as w:
        for _ in range(3):
            static = {
                "placeholder": torch.zeros(16, 1),
                "feature": pre(real),
                "dead": torch.relu(pre(real)),
                "masked": pre(real),
            }[case]
            context = project(static) * (0.0 if case == "masked" else 1.0)
            loss = nn.functional.mse_loss(head(torch.tanh(encoder(x) + context)), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return {f.subject: f.severity for f in w.report.findings if f.rule == "GS413"}


def test_a_weight_that_multiplies_a_placeholder_of_zeros_is_information():
    found = _never_updated("placeholder")
    assert found == {"project.weight": Severity.INFO}, found


def test_a_weight_fed_a_real_feature_learns():
    assert _never_updated("feature") == {}


@pytest.mark.parametrize("case", ["masked", "dead"])
def test_a_masked_layer_and_a_dead_one_before_it_still_warn(case):
    found = _never_updated(case)
    assert set(found) >= {"pre.weight", "pre.bias", "project.weight"}, found
    assert all(severity == Severity.WARNING for severity in found.values()), found
