"""Many trainings in one script, one after another (a hyperparameter search that tries a
high learning rate on purpose and prunes the trial that blows up): a finding about that
trial says which one, and a trial the script cut short does not fail the run. A trial that
blew up and ran its whole budget still does, and so does a blow-up in a model that every
later trial goes on training (the model built once, outside the loop)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import gradscope

LRS = (1e-2, 50.0, 3e-3, 1e-2)


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))


def _search(prune: bool, fresh_model: bool = True):
    torch.manual_seed(0)
    x, y = torch.randn(64, 4), torch.randn(64, 1)
    shared = _mlp()
    with gradscope.watch() as w:
        for lr in LRS:
            model = _mlp() if fresh_model else shared
            opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
            for i in range(8):
                loss = F.mse_loss(model(x[i * 8 : i * 8 + 8]), y[i * 8 : i * 8 + 8])
                opt.zero_grad()
                loss.backward()
                opt.step()
                if prune and not torch.isfinite(loss):
                    break  # the trial is pruned
    return w.report


def _of_trial_two(report):
    return [f for f in report.findings if "optimizer 1" in f.message]


def test_a_pruned_trials_blow_up_is_said_as_that_trials_and_kept_at_info():
    report = _search(prune=True)
    about = _of_trial_two(report)
    assert about, report.findings
    assert all(f.severity is gradscope.Severity.INFO for f in about)
    assert all("one of 4 trainings run one after another" in f.message for f in about)
    assert "trial cut short" in about[0].message
    assert not [f for f in report.findings if f.severity >= gradscope.Severity.WARNING]


def test_a_trial_that_blew_up_and_ran_its_whole_budget_still_fails_the_run():
    report = _search(prune=False)
    loud = [f for f in _of_trial_two(report) if f.severity is gradscope.Severity.ERROR]
    assert loud and all("one of 4 trainings" in f.message for f in loud)


def test_a_blow_up_every_later_trial_inherits_is_no_trial_of_its_own():
    report = _search(prune=True, fresh_model=False)
    assert [f for f in report.findings if f.severity is gradscope.Severity.ERROR]
    assert not [f for f in report.findings if "trainings run one after another" in f.message]


def _stale_list_search(stale: bool):
    """Each trial rebuilds the model; the optimizer is built from a parameter list that,
    when `stale`, was kept from the first trial."""
    torch.manual_seed(0)
    x, y = torch.randn(48, 4), torch.randn(48, 1)
    params = None
    with gradscope.watch() as w:
        for lr in (1e-2, 3e-3, 1e-3):
            model = _mlp()
            if params is None or not stale:
                params = list(model.parameters())
            opt = torch.optim.Adam(params, lr=lr)
            for i in range(6):
                loss = F.mse_loss(model(x[i * 8 : i * 8 + 8]), y[i * 8 : i * 8 + 8])
                opt.zero_grad()
                loss.backward()
                opt.step()
    return w.report


def test_an_optimizer_built_from_an_earlier_trials_parameters_is_named():
    named = [f for f in _stale_list_search(stale=True).findings if f.rule == "GS466"]
    assert [f.subject for f in named] == [
        "optimizer.step (optimizer 1 (Adam))",
        "optimizer.step (optimizer 2 (Adam))",
    ]
    assert "model.parameters()" in named[0].advice


def test_each_trial_building_its_optimizer_from_its_own_model_is_silent():
    report = _stale_list_search(stale=False)
    assert not [f for f in report.findings if f.severity >= gradscope.Severity.WARNING]


def _tanh_search(prune: bool):
    """An lr search over a tanh MLP under SGD with momentum: the trial at lr 0.3 blows up
    over its third epoch, where the script prunes it (`prune`) or lets it run out."""
    torch.manual_seed(0)
    x = torch.randn(192, 8)
    y = torch.sin(x[:, :1]) + 0.3 * x[:, 1:2] ** 2
    with gradscope.watch() as w:
        for lr in (1e-2, 0.3, 3e-3, 1e-2):
            model = nn.Sequential(
                nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 1)
            )
            opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
            for _ in range(6):
                for i in range(0, 192, 16):
                    loss = F.mse_loss(model(x[i : i + 16]), y[i : i + 16])
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                if prune and not loss.item() < 1e3:
                    break  # the trial is pruned
    return w.report


def test_a_pruned_trials_findings_about_no_step_are_said_as_that_trials_by_their_subject():
    report = _tanh_search(prune=True)
    stepless = [f for f in report.findings if f.rule in ("GS404", "GS409")]
    assert {f.rule for f in stepless} == {"GS404", "GS409"}, report.findings
    assert all(
        "one of 4 trainings run one after another (optimizer 1" in f.message for f in stepless
    )
    assert all(f.severity is gradscope.Severity.INFO for f in stepless)
    assert not [f for f in report.findings if f.severity >= gradscope.Severity.WARNING]


def test_the_same_trial_run_to_its_end_keeps_its_findings_about_no_step_loud():
    report = _tanh_search(prune=False)
    loud = {f.rule: f for f in report.findings if f.severity >= gradscope.Severity.WARNING}
    assert loud["GS404"].severity is gradscope.Severity.ERROR, report.findings
    assert loud["GS409"].severity is gradscope.Severity.WARNING
    for rule in ("GS404", "GS409"):
        assert "one of 4 trainings run one after another (optimizer 1" in loud[rule].message


def _trial(lr: float, x: torch.Tensor, y: torch.Tensor, fail: bool) -> None:
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for i in range(8):
        opt.zero_grad()
        F.mse_loss(model(x[i * 8 : i * 8 + 8]), y[i * 8 : i * 8 + 8]).backward()
        if fail:
            raise ValueError("the first step failed")  # out of memory, a loss not finite
        opt.step()


def test_a_trial_that_raised_before_its_first_step_is_no_layer_left_out_of_the_optimizer():
    """The second trial raises after its first backward; the search catches it (optuna's
    `catch=`) and keeps the exception a while, so its optimizer is still live at the next
    trial's first step, and gone by the end."""
    torch.manual_seed(0)
    x, y = torch.randn(64, 4), torch.randn(64, 1)
    held = []
    with gradscope.watch() as w:
        for k, lr in enumerate(LRS):
            try:
                _trial(lr, x, y, fail=k == 1)
            except ValueError as e:
                held.append(e)
            if k == 2:
                held.clear()
    outside = [f for f in w.report.findings if f.rule == "GS411"]
    assert outside and all(f.severity is gradscope.Severity.INFO for f in outside), outside
    assert "dropped by the script before it ever stepped" in outside[0].message
    assert not [f for f in w.report.findings if f.severity >= gradscope.Severity.WARNING]
