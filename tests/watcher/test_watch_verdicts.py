"""One seeded bug per verdict, each a plain loop a user could have written; healthy loops
give no finding."""

from __future__ import annotations

import os

import pytest
from watch_scripts import EXAMPLES, watched

from gradscope.findings import Severity
from gradscope.watcher import watch_script


def rules(report) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in report.findings:
        out.setdefault(f.rule, []).append(f)
    return out


def test_non_finite_names_the_step_and_the_first_parameters():
    (f,) = rules(watched("nan_batch.py"))["GS401"]
    assert f.value == 40 and "step 40" in f.message
    assert any("0.weight" in e for e in f.evidence)
    assert any(e.startswith("step 39 before it") for e in f.evidence)


def test_spike_at_the_outlier_batch_with_its_drivers():
    found = rules(watched("spike_batch.py"))
    (loss,) = found["GS402"]
    (norm,) = found["GS403"]
    assert "step 150" in loss.message and "step 150" in norm.message
    assert norm.evidence[0] == "spike steps: 150"
    assert any(e.startswith("layers that drove it") for e in norm.evidence)
    assert any("update norm" in e for e in norm.evidence)
    (lag,) = found["GS451"]  # Adam's v lags the ×40 batch: that step's update was huge
    assert lag.steps == (150,) and norm.explained_by == "GS451:optimizer-state"
    assert set(found) == {"GS402", "GS403", "GS451"}


def test_exploding_trend():
    (f,) = rules(watched("exploding.py"))["GS404"]
    assert f.value > 10 and "steadily" in f.message


def test_vanishing_over_time_names_the_dead_layer():
    found = rules(watched("dying_relu.py"))
    assert [f.subject for f in found["GS405"]] == ["0"]
    assert "GS410" not in found  # no gradient is not a learning-rate problem


def test_clipping_binds():
    (f,) = rules(watched("clip_tight.py"))["GS406"]
    # the value is the mean clip coefficient: max_norm 0.01 against norms ~0.4
    assert f.value < 0.05 and "learning-rate limiter" in f.message
    assert f.severity == Severity.WARNING and "bound on 80 of 80 steps" in f.message


def test_amp_skips_at_the_injected_steps_only():
    report = watched("amp_skips.py")
    assert [r.step for r in report.run.steps if r.skipped] == list(range(60, 70))
    found = rules(report)
    # its targets are random noise, so the loss cannot fall: GS415 says so, truly
    assert set(found) == {"GS407", "GS415"}
    assert "up to 10 in a row" in found["GS407"][0].message


def test_amp_scale_collapse():
    found = rules(watched("amp_skips.py", "--always"))
    (f,) = found["GS408"]
    assert f.value < 1 and "step 18" in f.message


def test_update_ratio_high_on_the_weight_matrix():
    found = rules(watched("lr_high.py"))
    assert [f.subject for f in found["GS409"]] == ["2.weight"]
    assert "GS409" not in rules(watched("lr_high.py", "0.02"))


def test_optimizer_setup_bugs_are_named_as_such():
    found = rules(watched("optimizer_bugs.py"))
    assert sorted(f.subject for f in found["GS411"]) == ["extra.bias", "extra.weight"]
    assert all("in no optimizer param group" in f.message for f in found["GS411"])
    lr0 = [f for f in found["GS410"] if f.subject.startswith("head.")]
    assert sorted(f.subject for f in lr0) == ["head.bias", "head.weight"]
    assert all("learning rate is 0" in f.message for f in lr0)
    assert not [f for f in found["GS410"] if f.subject.startswith("frozen.")]
    (frozen,) = found["GS421"]  # frozen but in the optimizer: one note for the module
    assert frozen.subject == "frozen" and frozen.severity == Severity.INFO
    assert "frozen.weight" in frozen.evidence[0] and "frozen.bias" in frozen.evidence[0]
    assert sorted(f.subject for f in found["GS413"]) == ["unused.bias", "unused.weight"]
    assert "GS412" not in found  # opt.zero_grad() cannot reset `extra`: not its fault


def test_missing_zero_grad_but_not_deliberate_accumulation():
    (f,) = rules(watched("no_zero_grad.py"))["GS412"]
    assert "zero_grad() is missing" in f.message
    report = watched("accumulate.py")
    assert report.findings == []
    assert {r.backward_calls for r in report.run.steps} == {4}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("example", "argv"),
    [
        ("train_mlp.py", ["--steps", "300"]),
        ("train_cnn.py", ["--steps", "200"]),
        ("train_gpt.py", ["--steps", "300"]),
    ],
)
def test_healthy_training_gives_no_finding(example, argv):
    report = watch_script(os.path.join(EXAMPLES, example), argv)
    assert report.run.status == "completed" and len(report.run.steps) == int(argv[1])
    assert report.findings == [], [f.message for f in report.findings]
