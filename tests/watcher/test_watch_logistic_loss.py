"""The logistic loss -log sigmoid(x) = softplus(-x) of negative sampling (word2vec,
RotatE, ComplEx), read off the loss's graph as a loss bounded below by 0: a log sigmoid
added to the loss (its sign flipped) is ascended, GS418. A sigmoid's log-derivative,
log sigmoid(x) + log sigmoid(-x) of one x (a flow's log-determinant), is no such loss."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import gradscope
from gradscope.findings import Severity
from gradscope.watcher import loss_graph

X = torch.randn(8, requires_grad=True)


@pytest.mark.parametrize(
    ("loss", "negated"),
    [
        (lambda: -F.logsigmoid(X).mean(), [False]),
        (lambda: F.logsigmoid(X).mean(), [True]),
        (lambda: F.softplus(-X).sum() + F.softplus(X[:4]).mean(), [False, False]),
        (lambda: -F.softplus(X).mean() / 2, [True]),
    ],
)
def test_log_sigmoid_and_softplus_are_the_logistic_loss(loss, negated):
    kind = loss_graph.read(loss())
    assert [t.kind for t in kind.terms] == ["logistic_loss"] * len(negated)
    assert [t.negated for t in kind.terms] == negated and kind.known


def test_a_sigmoid_log_derivative_is_no_logistic_loss():
    kind = loss_graph.read((F.logsigmoid(X) + F.logsigmoid(-X)).sum())
    assert not kind.terms and kind.unknown_terms == 2


def _negative_sampling(flipped: bool, split: bool = False):
    """Skip-gram with negative sampling: centre and context tables, k noise words; `split`:
    sparse tables under SparseAdam and a dense word bias under Adam, one loss for both."""
    torch.manual_seed(0)
    centre, context = torch.nn.Embedding(50, 8, sparse=split), torch.nn.Embedding(50, 8)
    bias = torch.nn.Parameter(torch.zeros(50))
    if split:
        opts = [torch.optim.SparseAdam(centre.parameters(), lr=0.05)]
        opts.append(torch.optim.Adam([*context.parameters(), bias], lr=0.05))
    else:
        opts = [torch.optim.Adam([*centre.parameters(), *context.parameters(), bias], lr=0.05)]
    pairs = torch.randint(0, 50, (64, 2))
    with gradscope.watch() as w:
        for _ in range(40):
            c, o = centre(pairs[:, 0]), context(pairs[:, 1])
            noise = context(torch.randint(0, 50, (64, 5)))
            pos = F.logsigmoid((c * o).sum(-1) + bias[pairs[:, 1]])
            neg = F.logsigmoid(-(noise @ c.unsqueeze(-1)).squeeze(-1)).sum(-1)
            loss = (pos + neg).mean() if flipped else -(pos + neg).mean()
            for opt in opts:
                opt.zero_grad()
            loss.backward()
            for opt in opts:
                opt.step()
    return w.report.findings


def test_negative_sampling_with_its_sign_flipped_is_ascended():
    """It was unknown (a custom loss) and the run ended with no finding."""
    (f,) = [f for f in _negative_sampling(flipped=True) if f.rule == "GS418"]
    assert f.severity == Severity.ERROR and "-F.logsigmoid(score)" in f.advice


def test_negative_sampling_minimised_is_clean():
    assert [f.rule for f in _negative_sampling(flipped=False)] == []


def test_one_flipped_loss_stepped_by_two_optimizers_is_ascended_once():
    """Sparse tables under SparseAdam and the rest under Adam step one loss: GS418 judged
    one optimizer only (a GAN's players ascend by design) and said nothing."""
    (f,) = [f for f in _negative_sampling(flipped=True, split=True) if f.rule == "GS418"]
    assert f.severity == Severity.ERROR


def test_one_loss_stepped_by_two_optimizers_minimised_is_clean():
    assert [f.rule for f in _negative_sampling(flipped=False, split=True)] == []


def _reinforce(log_prob):
    """REINFORCE on a bandit, one sample per step: loss = -R log pi(a), R = +1 or -1 as a
    Python float, so the log-probability's term comes with either sign."""
    torch.manual_seed(0)
    policy = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(policy.parameters(), lr=0.05)
    with gradscope.watch() as w:
        for _ in range(40):
            s = torch.randn(1, 4)
            logits = policy(s)
            a = int(torch.multinomial(F.softmax(logits, -1), 1))
            reward = 1.0 if a == int(s.sum() > 0) else -1.0
            loss = -reward * log_prob(logits, a)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return w.report.findings


@pytest.mark.parametrize(
    "log_prob",
    [
        lambda logits, a: -F.cross_entropy(logits, torch.tensor([a])),
        lambda logits, a: F.logsigmoid((logits[0, 1] - logits[0, 0]) * (1 if a else -1)),
    ],
)
def test_a_return_of_either_sign_is_no_ascent(log_prob):
    """The kind came negated at the steps with R < 0: GS418 said the run maximised its
    cross-entropy (an error on a healthy policy gradient)."""
    assert [f.rule for f in _reinforce(log_prob) if f.rule == "GS418"] == []
