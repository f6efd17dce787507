"""A model left in eval mode from the start, whose BatchNorms never measured a batch (still
mean 0, variance 1), normalises nothing: SGD at a rate set for the normalised network blows
it up to NaN. The cause is the mode (GS440), which leads; the lr that is too high for the
network without its normalisation (GS419), the NaN and the still statistics (GS441) are
its consequences. Before, GS419 led and called the NaN its own. With statistics measured
before eval() (a pretrained model fine-tuned in eval) the BatchNorms normalise, and the
same blow-up stays the learning rate's."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import gradscope


def _findings(measured: bool) -> dict[str, str | None]:
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(16, 64),
        nn.BatchNorm1d(64),
        nn.ReLU(),
        nn.Linear(64, 64),
        nn.BatchNorm1d(64),
        nn.ReLU(),
        nn.Linear(64, 4),
    )
    x = torch.randn(512, 16) * 3 + 2
    y = x[:, :4].argmax(1)
    if measured:
        with torch.no_grad():
            for i in range(0, 512, 64):
                model(x[i : i + 64])
    model.eval()
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    with gradscope.watch() as w:
        for _ in range(60):
            batch = torch.randint(0, 512, (64,))
            loss = F.cross_entropy(model(x[batch]), y[batch])
            opt.zero_grad()
            loss.backward()
            opt.step()
    return {f.rule: f.explained_by for f in w.report.findings}


def test_batchnorms_in_eval_on_unmeasured_statistics_lead_the_blow_up():
    found = _findings(measured=False)
    assert found["GS440"] is None, found
    assert found["GS419"] == "GS440:Sequential" and found["GS441"] == "GS440:Sequential"
    assert found["GS401"] is not None, found


def test_batchnorms_in_eval_on_measured_statistics_leave_the_blow_up_to_the_lr():
    found = _findings(measured=True)
    assert found["GS419"] is None and "GS441" not in found, found
    assert found["GS401"] == "GS419:learning-rate", found
