"""GS444 on a BatchNorm recalibration after training (AdaBN, BN-adapt): the model run in
train mode without gradients on new data once the optimizer has stopped, with the default
momentum, then used in eval mode on the statistics it re-estimated. Information; an
evaluation left in train mode as the run's last act, or one in the middle of training, is
still a warning."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from gradscope import api
from gradscope.findings import Severity


def _gs444(when: str, then_eval: bool) -> list:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def passes() -> None:
        model.train()
        with torch.no_grad():
            for _ in range(4):
                model(torch.randn(16, 8) * 2 + 1)  # the shifted data

    with api.watch() as w:
        for step in range(4):
            if when == "during" and step == 2:
                passes()
            loss = F.cross_entropy(model(torch.randn(16, 8)), torch.randint(0, 3, (16,)))
            opt.zero_grad()
            loss.backward()
            opt.step()
        if when == "after":
            passes()
        if then_eval:
            model.eval()
            with torch.no_grad():
                model(torch.randn(16, 8) * 2 + 1)
    return [f for f in w.report.findings if f.rule == "GS444"]


def test_statistics_re_estimated_after_training_then_used_are_information():
    (found,) = _gs444("after", then_eval=True)
    assert found.severity is Severity.INFO and "recalibration" in found.message, found


@pytest.mark.parametrize(("when", "then_eval"), [("after", False), ("during", True)])
def test_an_evaluation_in_train_mode_is_still_a_warning(when, then_eval):
    (found,) = _gs444(when, then_eval)
    assert found.severity is Severity.WARNING, found
