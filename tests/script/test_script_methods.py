"""A model used through a method of its own, never called (an exact Gaussian process's
`gp.nlml(X, y)` over log-parametrised hyperparameters): no forward hook runs, yet its
parameters are leaves of the loss's graph. inspect refused it as a backward "before any
nn.Module with trainable parameters ran" (exit 2 on a healthy script); it measures the
modules that own those parameters, the outermost of them."""

from __future__ import annotations

import pytest

import gradscope
from gradscope.errors import TargetError

GP = """
import math
import torch
from torch import nn

class GP(nn.Module):
    def __init__(self):
        super().__init__()
        self.log_ls = nn.Parameter(torch.tensor(0.0))
        self.log_noise = nn.Parameter(torch.tensor(-2.0))
        self.mean = nn.Linear(1, 1)  # a mean function used by its weights, not called

    def nlml(self, X, y):
        r = y - (X @ self.mean.weight.T + self.mean.bias).squeeze(-1)
        K = torch.exp(-0.5 * (X - X.T) ** 2 / self.log_ls.exp() ** 2)
        L = torch.linalg.cholesky(K + self.log_noise.exp() * torch.eye(len(X)))
        alpha = torch.cholesky_solve(r[:, None], L)
        return 0.5 * (r[:, None] * alpha).sum() + torch.log(torch.diagonal(L)).sum()

torch.manual_seed(0)
X = torch.rand(20, 1) * 6
y = torch.sin(X).squeeze(-1)
gp = GP()
opt = torch.optim.Adam(gp.parameters(), lr=0.1)
for _ in range(3):
    opt.zero_grad()
    gp.nlml(X, y).backward()
    opt.step()
"""


@pytest.fixture
def scripts(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gp.py").write_text(GP)
    return tmp_path


def test_a_model_used_through_its_own_method_is_measured(scripts):
    report = gradscope.inspect_script("gp.py")
    names = {p.name for p in report.stats.params}
    assert names == {"log_ls", "log_noise", "mean.weight", "mean.bias"}, names
    assert all(p.grad_norm > 0 for p in report.stats.params), report.stats.params
    assert report.findings == [], report.findings


def test_a_plain_tensor_still_has_no_model_to_measure(scripts):
    (scripts / "t.py").write_text(
        "import torch\nfrom torch import nn\nm = nn.Linear(2, 1)\n"
        "(torch.ones(2, requires_grad=True) * 2).sum().backward()\n"
    )
    with pytest.raises(TargetError, match=r"before any nn\.Module with trainable parameters ran"):
        gradscope.inspect_script("t.py")
