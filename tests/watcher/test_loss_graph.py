"""The loss's kind read off its autograd graph: torch's functional losses, the ways scripts
scale, negate and sum them, a HuggingFace model's own loss; and the optimizer's settings."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from gradscope.watcher import loss_graph
from gradscope.watcher.optim_settings import SettingsHistory, group_settings

torch.manual_seed(0)
X = torch.randn(6, 5, requires_grad=True)
Y = torch.randint(0, 5, (6,))
Z = torch.zeros(6, 5)


@pytest.mark.parametrize(
    ("loss", "kinds", "bound", "uniform"),
    [
        (lambda: F.cross_entropy(X, Y), ["cross_entropy"], 0.0, math.log(5)),
        (lambda: F.cross_entropy(X, Y) / 4, ["cross_entropy"], 0.0, math.log(5) / 4),
        (lambda: F.cross_entropy(X, Y, reduction="sum"), ["cross_entropy"], 0.0, 6 * math.log(5)),
        (lambda: F.cross_entropy(X, Y, reduction="none").mean(), ["cross_entropy"], 0.0, None),
        (
            lambda: F.cross_entropy(X, Y, label_smoothing=0.1),
            ["cross_entropy", "label_smoothing"],
            0.1 * math.log(5),  # the smoothing term is least at a uniform guess
            math.log(5),
        ),
        (lambda: F.nll_loss(F.log_softmax(X, -1), Y), ["cross_entropy"], 0.0, math.log(5)),
        (lambda: F.nll_loss(X, Y), ["nll"], None, None),  # raw scores: not bounded
        (  # a graph network's training nodes: rows of the log-probabilities
            lambda: F.nll_loss(F.log_softmax(X, -1)[:4], Y[:4]),
            ["cross_entropy"],
            0.0,
            math.log(5),
        ),
        (lambda: F.mse_loss(X, Z) + F.cross_entropy(X, Y), ["mse", "cross_entropy"], 0.0, None),
        (
            lambda: F.binary_cross_entropy_with_logits(X, Z),
            ["binary_cross_entropy_with_logits"],
            0.0,
            None,
        ),
        (lambda: F.huber_loss(X, Z) * 0.5, ["huber"], 0.0, None),
        (lambda: (X**2).mean(), [], None, None),
    ],
)
def test_torch_losses_are_recognised_with_their_bound(loss, kinds, bound, uniform):
    kind = loss_graph.read(loss())
    assert [t.kind for t in kind.terms] == kinds
    assert kind.lower_bound() == pytest.approx(bound)
    if uniform is not None:
        assert kind.uniform() == pytest.approx(uniform)


@pytest.mark.parametrize(
    "loss",
    [
        lambda: -F.cross_entropy(X, Y),
        lambda: F.cross_entropy(X, Y) * -1,
        lambda: 0.1 * F.mse_loss(X, Z) - F.cross_entropy(X, Y),
    ],
)
def test_a_negated_bounded_loss_is_seen_as_negated(loss):
    kind = loss_graph.read(loss())
    assert [t.kind for t in kind.negated_terms()] == ["cross_entropy"]
    assert kind.lower_bound() is None


def test_a_factor_on_a_device_or_with_grad_is_not_read():
    weight = torch.tensor(2.0, requires_grad=True)
    kind = loss_graph.read(F.cross_entropy(X, Y) * weight)
    assert kind.unknown_terms == 1  # a learned weight times the loss: not a constant


def test_a_transformers_causal_lm_loss_is_a_cross_entropy_over_its_vocabulary():
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=50, n_positions=16)
    model = transformers.GPT2LMHeadModel(config)
    ids = torch.randint(0, 50, (2, 8))
    kind = loss_graph.read(model(input_ids=ids, labels=ids).loss)
    assert [(t.kind, t.classes) for t in kind.terms] == [("cross_entropy", 50)]
    assert kind.lower_bound() == 0.0 and kind.uniform() == pytest.approx(math.log(50))


def test_optimizer_settings_name_decoupled_decay_momentum_and_maximize():
    p = torch.nn.Parameter(torch.zeros(3))
    adamw = group_settings(a := torch.optim.AdamW([p], lr=1e-3), a.param_groups[0])
    assert adamw.decoupled and adamw.weight_decay == 0.01 and adamw.betas == (0.9, 0.999)
    sgd = torch.optim.SGD([p], lr=0.1, momentum=0.9, weight_decay=5e-4, maximize=True)
    s = group_settings(sgd, sgd.param_groups[0])
    assert not s.decoupled and s.momentum == 0.9 and s.maximize and s.betas is None
    adam = torch.optim.Adam([p], lr=1e-3, weight_decay=0.1, decoupled_weight_decay=True)
    assert group_settings(adam, adam.param_groups[0]).decoupled


def test_settings_history_keeps_changes_but_not_a_schedule_of_the_lr():
    p = torch.nn.Parameter(torch.zeros(3))
    opt = torch.optim.AdamW([p], lr=1e-3)
    history = SettingsHistory()
    for step in range(1, 6):
        opt.param_groups[0]["lr"] = 1e-3 * step
        if step == 4:
            opt.param_groups[0]["weight_decay"] = 0.5
        history.observe(0, step, opt)
    (entries,) = history.of(1)
    assert [e.since for e in entries] == [1, 4]
    assert entries[1].groups[0].weight_decay == 0.5


@pytest.mark.parametrize("shape", [(6, 5), (2, 3, 5)])
def test_the_hf_trainers_label_smoother_is_read_without_failing(shape):
    """`label_smoothing_factor` in the HF Trainer: LabelSmoother takes log_softmax over
    dim=-1, which autograd saves as 2**64 - 1 (the watch failed in the backward hook)."""
    trainer_utils = pytest.importorskip("transformers.trainer_pt_utils")
    logits = torch.randn(*shape, requires_grad=True)
    labels = torch.randint(0, 5, shape[:-1])
    kind = loss_graph.read(trainer_utils.LabelSmoother(0.1)({"logits": logits}, labels))
    assert [(t.kind, t.classes) for t in kind.terms] == [("label_smoothing", 5)]
