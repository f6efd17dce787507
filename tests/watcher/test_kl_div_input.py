"""A softmax handed to `kl_div` as its input (knowledge distillation's classic slip,
`KLDivLoss()(F.softmax(s / T), F.softmax(t / T))`): kl_div reads its input as
log-probabilities, so the loss is Σ target·p plus a constant, least with all of p on the
teacher's top class. The student learns the argmax and the dark knowledge is lost, with no
NaN and a loss that still falls. Likewise probabilities as the target with log_target=True: the
student is pulled toward softmax(target), near uniform. The KL term
is no loss gradscope reads, so both went unnamed; now GS431 in watch and GS432 in inspect
name them from the graph. A log_softmax input (either target form, a bfloat16 teacher's
too), a KL by hand whose target is masked or weighted, and losses that use a softmax's
probabilities on purpose (poly-1's 1 - p_t, a Brier score, an expected cost) are right."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import gradscope

T = 4.0


def _kd_loss(s: torch.Tensor, t: torch.Tensor, y: torch.Tensor, how: str) -> torch.Tensor:
    if how == "kldivloss-probs":
        return nn.KLDivLoss(reduction="batchmean")(F.softmax(s / T, 1), F.softmax(t / T, 1)) * T * T
    if how == "log-target-probs":
        kd = F.kl_div(F.softmax(s, 1), F.log_softmax(t, 1), reduction="batchmean", log_target=True)
        return kd
    if how == "by-hand-probs":  # the KD tutorial's sum, a softmax where its log_softmax was
        p_t = F.softmax(t / T, -1)
        return torch.sum(p_t * (p_t.log() - F.softmax(s / T, -1))) / s.shape[0] * T**2
    if how == "none-then-sum":
        kd = F.kl_div(F.softmax(s, 1), F.softmax(t, 1), reduction="none")
        return kd.sum(1).mean()
    if how in ("log-target-given-probs", "log-target-given-bf16-probs", "log-target-bf16"):
        target = {
            "log-target-given-probs": F.softmax(t / T, 1),
            "log-target-given-bf16-probs": F.softmax(t.bfloat16() / T, 1).float(),
            "log-target-bf16": F.log_softmax(t.bfloat16() / T, 1).float(),
        }[how]
        log_p = F.log_softmax(s / T, 1)
        return F.kl_div(log_p, target, reduction="batchmean", log_target=True) * T * T
    if how in ("by-hand-masked", "by-hand-t2-inside"):  # p·(log p - log q), p scaled
        p_t = F.softmax(t / T, -1)
        keep = (torch.arange(s.shape[0]) % 3 != 0).float()[:, None]
        weight = keep if how == "by-hand-masked" else torch.full_like(keep, T * T)
        log_q = F.log_softmax(s / T, -1)
        return (weight * p_t * (p_t.log() - log_q)).sum() / s.shape[0]
    if how == "kldivloss":
        log_p = F.log_softmax(s / T, 1)
        return nn.KLDivLoss(reduction="batchmean")(log_p, F.softmax(t / T, 1)) * T * T
    if how == "log-target":
        return F.kl_div(
            F.log_softmax(s, 1), F.log_softmax(t, 1), reduction="batchmean", log_target=True
        )
    probs, onehot = F.softmax(s, 1), F.one_hot(y, 5).float()
    if how == "poly1":
        return (F.cross_entropy(s, y, reduction="none") + 1 - (onehot * probs).sum(1)).mean()
    if how == "brier":
        return ((onehot - probs) ** 2).sum(1).mean()
    cost = 1.0 - torch.eye(5)  # expected misclassification cost
    return (cost[y] * probs).sum(1).mean()


def _distil(how: str, steps: int = 4) -> list[gradscope.Finding]:
    torch.manual_seed(0)
    teacher, student = nn.Linear(6, 5), nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 5))
    opt = torch.optim.SGD(student.parameters(), lr=0.05)
    with gradscope.watch() as w:
        for _ in range(steps):
            x = torch.randn(16, 6)
            with torch.no_grad():
                t = teacher(x)
            loss = _kd_loss(student(x), t, t.argmax(1), how)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return [f for f in w.report.findings if f.rule == "GS431"]


@pytest.mark.parametrize(
    "how", ["kldivloss-probs", "log-target-probs", "by-hand-probs", "none-then-sum"]
)
def test_a_softmax_as_kl_divs_input_is_named(how):
    (found,) = _distil(how)
    assert "kl_div" in found.message and "log_softmax" in found.advice


@pytest.mark.parametrize("how", ["log-target-given-probs", "log-target-given-bf16-probs"])
def test_a_log_target_that_is_no_log_probabilities_is_named(how):
    (found,) = _distil(how)
    assert "log_target=True" in found.message and "log_softmax(t / T" in found.advice


@pytest.mark.parametrize(
    "how",
    [
        "kldivloss",
        "log-target",
        "log-target-bf16",
        "by-hand-masked",
        "by-hand-t2-inside",
        "poly1",
        "brier",
        "cost",
    ],
)
def test_log_probabilities_and_losses_of_probabilities_are_right(how):
    assert _distil(how) == []


def test_inspect_names_it_too():
    teacher = nn.Linear(6, 5)

    def loss_fn(out: torch.Tensor) -> torch.Tensor:
        target = F.softmax(teacher(torch.ones(8, 6)).detach() / T, 1)
        return nn.KLDivLoss(reduction="batchmean")(out, target)

    model = nn.Sequential(nn.Linear(6, 5), nn.Softmax(dim=1))
    report = gradscope.inspect(model, torch.randn(8, 6), loss_fn)
    (found,) = [f for f in report.findings if f.rule == "GS432"]
    assert "kl_div" in found.advice
    model[1] = nn.LogSoftmax(dim=1)
    plain = gradscope.inspect(model, torch.randn(8, 6), loss_fn)
    assert "GS432" not in {f.rule for f in plain.findings}
