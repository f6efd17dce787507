"""The Poisson NLL of count models read off the loss's graph (watcher/poisson_terms.py):
exp(x) - y·x on a log-rate x, μ - y·log(μ + ε) on a rate μ. A log-rate that comes out of a
positive link (exp, softplus, relu) is a rate fed where a log-rate is wanted: every predicted
rate is at least 1, GS431. A softplus rate under log_input=False is no logistic loss."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import gradscope
from gradscope.findings import Severity
from gradscope.watcher import loss_graph

X = torch.randn(8, requires_grad=True)
Y = torch.poisson(torch.full((8,), 2.0))


@pytest.mark.parametrize(
    ("loss", "misfed"),
    [
        (lambda: F.poisson_nll_loss(X, Y), None),
        (lambda: F.poisson_nll_loss(X + 0.5, Y, full=True, reduction="sum"), None),
        (lambda: (torch.exp(X) - Y * X).mean(), None),
        (lambda: F.poisson_nll_loss(F.softplus(X), Y, log_input=False), None),
        (lambda: (lambda mu: (mu - Y * torch.log(mu)).mean())(X.exp()), None),
        (lambda: F.poisson_nll_loss(X.exp(), Y), "rate-as-log-rate"),
        (lambda: F.poisson_nll_loss(F.softplus(X).view(2, 4), Y.view(2, 4)), "rate-as-log-rate"),
        (lambda: torch.nn.PoissonNLLLoss()(torch.relu(X), Y), "rate-as-log-rate"),
        (lambda: (lambda z: -(Y * z - z.exp()).mean())(F.softplus(X)), "rate-as-log-rate"),
        (lambda: -(Y * X - X.exp()).sum(), None),
    ],
)
def test_the_poisson_nll_and_what_feeds_it(loss, misfed):
    """Also written as its log-likelihood y·x - exp(x), negated: the same term, not negated."""
    kind = loss_graph.read(loss())
    assert [t.kind for t in kind.terms] == ["poisson_nll"] and kind.known
    assert kind.terms[0].misfed == misfed and not kind.terms[0].negated


def _count_regression(head: str, log_input: bool):
    """Poisson regression with an exposure offset: the model's output is a log-rate (`raw`),
    or a rate (`exp`, `softplus`)."""
    torch.manual_seed(0)
    x = torch.randn(256, 4)
    exposure = torch.rand(256) + 0.5
    y = torch.poisson(torch.exp(0.5 * x[:, 0] - 0.5) * exposure)
    model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    with gradscope.watch() as w:
        for i in range(0, 256 * 3, 32):
            b = slice(i % 256, i % 256 + 32)
            z = model(x[b]).squeeze(-1) + exposure[b].log()
            out = {"raw": z, "exp": z.exp(), "softplus": F.softplus(z)}[head]
            loss = F.poisson_nll_loss(out, y[b], log_input=log_input)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return w.report.findings


@pytest.mark.parametrize("head", ["exp", "softplus"])
def test_a_rate_fed_as_a_log_rate_is_named(head):
    """It ran with no finding: the loss fell, only never to the zero counts' level."""
    (f,) = [f for f in _count_regression(head, log_input=True) if f.rule == "GS431"]
    assert f.severity == Severity.ERROR and f"comes out of {head}" in f.message
    assert "log_input=False" in f.advice


@pytest.mark.parametrize(("head", "log_input"), [("raw", True), ("exp", False)])
def test_a_log_rate_or_a_rate_fed_as_such_is_clean(head, log_input):
    assert [f.rule for f in _count_regression(head, log_input)] == []


@pytest.mark.parametrize(("link", "named"), [(torch.nn.Softplus(), True), (None, False)])
def test_inspect_names_a_rate_fed_as_a_log_rate(link, named):
    """inspect reads the same graph at its one pass (GS432)."""
    torch.manual_seed(0)
    layers = [torch.nn.Linear(4, 1), torch.nn.Flatten(0)] + ([link] if link else [])
    counts = torch.poisson(torch.ones(16))
    report = gradscope.inspect(
        torch.nn.Sequential(*layers),
        torch.randn(16, 4),
        loss_fn=lambda out: F.poisson_nll_loss(out, counts),
    )
    assert [f.rule for f in report.findings if f.rule == "GS432"] == (["GS432"] if named else [])
