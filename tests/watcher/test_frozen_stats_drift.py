"""A network frozen with requires_grad_(False) but left in train mode refolds every batch
into its BatchNorms' running statistics: SRGAN's perceptual feature network or a linear
probe's backbone drifts under the trained model (GS448). Frozen networks in eval mode, a
MoCo key encoder that its momentum update writes, and BatchNorms frozen alone inside a
trained block stay silent (tests/watcher/domain_scripts/frozen_features.py)."""

from __future__ import annotations

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched


@pytest.mark.parametrize(
    ("mode", "network"), [("train", "features"), ("probe-train", "net.backbone")]
)
def test_a_frozen_network_in_train_mode_is_named_with_its_batchnorms(mode, network):
    report = domain_watched("frozen_features.py", mode)
    assert not report.faults, report.internal_error()
    (f,) = [f for f in report.findings if f.rule == "GS448"]
    assert f.subject == network and f.severity == Severity.WARNING
    forwards = {"train": 10, "probe-train": 5}[mode]  # after the first step's forward(s)
    assert f"2 BatchNorm modules ran {forwards} forwards in train mode" in f.message
    assert f"call .eval() on {network}" in f.advice


@pytest.mark.parametrize("mode", ["eval", "probe-eval", "momentum", "affine"])
def test_frozen_networks_in_eval_or_moved_by_hand_are_silent(mode):
    report = domain_watched("frozen_features.py", mode)
    assert not report.faults, report.internal_error()
    assert [f for f in report.findings if f.severity >= Severity.INFO] == [], report.findings


def test_a_feature_network_in_eval_left_in_the_optimizer_is_told_to_freeze_not_to_train():
    """SRGAN's shape: the critic's optimizer steps first, so the generator's optimizer and
    the feature network beside it are found at its own first step, which counts in eval.
    Both are Sequentials (as a greedy-rollout baseline is of its policy's class): the class
    alone names either, so the message names the one in eval by the script's name for it;
    the subject stays the class, as configs and baselines spell it."""
    report = domain_watched("frozen_features.py", "in-optimizer")
    (f,) = [f for f in report.findings if f.rule == "GS440"]
    assert f.subject == "Sequential"
    assert f.message.startswith("features (Sequential) was in eval mode"), f.message
    assert "at every one of its 6 optimizer steps" in f.message, f.message
    assert "beside net (Sequential)" in f.message and "meant to stay fixed" in f.message
    assert f.advice.startswith(
        "if features (Sequential) is meant to stay fixed, call requires_grad_"
    )
    assert "GS448" not in {g.rule for g in report.findings}  # trained: not a frozen network


def test_a_lone_model_left_in_eval_keeps_the_plain_advice():
    from tests.watcher.test_watch_state import rules, watched

    (f,) = rules(watched("state_lm.py", "eval-start", "2"))["GS440"]
    assert "meant to stay fixed" not in f.message and f.advice.startswith("call model.train()")
