"""A model trained on its own predictions (it runs forward without gradients at most of its
steps: an agent choosing its actions, a TD target made by the model it trains) has batches
and targets that move as it learns: a DQN's loss rises when the first rewards enter its
replay. Its rise is information, not a learning rate too high (GS414 was an error on a
healthy Rainbow-style DQN). A run that evaluates every few steps is no such run: its
blow-up is still judged; and the DQN's own bug, a TD target computed with gradients on, is
still named."""

from __future__ import annotations

import dataclasses

import pytest
from test_watch_rules_series import found, run_of, tiny_transformer_lr_03

from gradscope.findings import Severity
from gradscope.steps.state_facts import StateFacts
from tests.watcher.watch_scripts import domain_watched


@pytest.fixture(scope="module")
def noisy():
    return domain_watched("replay_dqn.py", "noisy")


def test_a_dqn_whose_loss_rises_with_its_first_rewards_is_not_blamed_on_the_lr(noisy):
    assert noisy.run.status == "completed"
    assert [f for f in noisy.findings if f.severity >= Severity.WARNING] == [], noisy.findings
    for f in noisy.findings:
        if f.rule == "GS414":
            assert f.advice.startswith("not judged: the trained model ran forward without")
    assert noisy.run.state_facts.no_grad_steps >= len(noisy.run.steps) - 1


def test_a_td_target_computed_with_gradients_is_still_named():
    report = domain_watched("replay_dqn.py", "undetached")
    errors = [f for f in report.findings if f.rule == "GS411"]
    assert errors and all(f.severity == Severity.ERROR for f in errors)
    assert "torch.no_grad()" in errors[0].advice


def _with_no_grad_steps(run, seen):
    return dataclasses.replace(run, state_facts=StateFacts(no_grad_steps=seen))


def test_a_blowup_is_judged_where_the_model_runs_without_gradients_only_at_times():
    run = run_of(tiny_transformer_lr_03())
    (every_tenth,) = found(_with_no_grad_steps(run, len(run.steps) // 10))["GS414"]
    assert every_tenth.severity == Severity.ERROR  # an evaluation every 10 steps
    (acting,) = found(_with_no_grad_steps(run, len(run.steps)))["GS414"]
    assert acting.severity == Severity.INFO and "at 100 of the run's 100" in acting.advice
