"""Silent bugs of order and scale named by their mechanism (GS435-GS438), on a tiny
character-level LM and an MLP classifier (scripts/silent_order.py), each within a couple of
optimizer steps of the bug's first effect and first in the report; and the healthy look-alike
of each class, on which nothing warns."""

from __future__ import annotations

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import watched

pytestmark = pytest.mark.slow

KINDS = ["lm", "clf"]


def _run(kind: str, bug: str, steps: int = 60):
    return watched("silent_order.py", kind, bug, str(steps))


def _first(report, rule: str):
    """The rule's finding, which must lead the report (cause first)."""
    assert report.findings, "no findings"
    first = report.findings[0]
    assert first.rule == rule, [(f.rule, f.message) for f in report.findings]
    return first


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "bug",
    [
        "healthy",
        "accum",
        "micro-steps",
        "cosine-steps",
        "onecycle",
        "steplr-epoch",
        "cosine-floor",
        "cosine-last",
        "linear-steps",
        "warmup-cosine",
        "multistep-end",
        "exp-end",
    ],
)
def test_look_alikes_of_order_give_no_warning(kind, bug):
    report = _run(kind, bug)
    loud = [f for f in report.findings if f.severity >= Severity.WARNING]
    assert loud == [], [f.message for f in loud]
    assert not any(f.rule in ("GS435", "GS436") for f in report.findings)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "bug", ["load-copy", "replace-before", "sum-adam", "twice-adam", "sum-sgd-small"]
)
def test_look_alikes_of_stale_params_and_reductions_give_no_warning(kind, bug):
    report = _run(kind, bug)
    loud = [f for f in report.findings if f.severity >= Severity.WARNING]
    assert loud == [], [f.message for f in loud]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("bug", ["zero-inside", "module-inside", "none-inside"])
def test_gradients_wiped_inside_a_step_are_named_first_at_step_two(kind, bug):
    report = _run(kind, bug)
    first = _first(report, "GS435")
    assert first.severity == Severity.ERROR and first.subject == "optimizer.zero_grad"
    assert "the first 3 of 4 micro-batches were wiped" in first.message
    if bug != "none-inside":  # zero_grad's own line; `.grad = None` has no call to point at
        assert "silent_order.py:" in first.message
    assert "step 1 counts 1 backward call(s)" in first.evidence[1]
    assert all(f.explained_by for f in report.findings[1:])  # GS414's "rise" is this
    assert all("lower the learning rate" not in f.advice for f in report.findings)
    assert [r.wiped for r in report.run.steps[:3]] == [None, 3, 3]
    early = _run(kind, bug, 2)  # detected from the second step on
    assert early.findings and early.findings[0].rule == "GS435"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("bug", "step", "settings"),
    [
        ("steplr-batch", 21, "StepLR(step_size=10, gamma=0.1)"),
        ("exp-batch", 22, "ExponentialLR(gamma=0.8)"),
        ("cosine-batch", 11, "CosineAnnealingLR(T_max=10, eta_min=0)"),
        ("steplr-micro", 18, "StepLR(step_size=10, gamma=0.5)"),
        ("multistep-batch", 11, "MultiStepLR(milestones=[5, 10], gamma=0.1)"),
        ("linear-batch", 11, "LinearLR(total_iters=10)"),
    ],
)
def test_an_epoch_schedule_stepped_per_batch_is_named_with_the_step_of_its_collapse(
    kind, bug, step, settings
):
    report = _run(kind, bug)
    first = _first(report, "GS436")
    assert settings in first.message and f"at step {step}, below 1% of its peak" in first.message
    assert "silent_order.py:" in first.message and first.steps == (step,)
    per_micro = bug == "steplr-micro"
    assert ("per micro-batch" in first.message) == per_micro
    assert ("not per micro-batch" if per_micro else "once per epoch") in first.advice


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("bug", "step"), [("cosine-batch", 11), ("linear-batch", 11)])
def test_a_schedule_the_run_outlived_is_named_one_step_after_its_end(kind, bug, step):
    """A schedule sized in calls (T_max=10, total_iters=10) ends at call 10: the run that
    steps once past that end names the collapse; the run that ends there is silent."""
    report = _run(kind, bug, step + 1)
    first = _first(report, "GS436")
    assert first.steps == (step,) and "trained 1 more steps" in first.message
    assert f"the run went past that end at step {step + 1}" in first.evidence[-1]
    at_collapse = _run(kind, bug, step)
    assert not any(f.rule == "GS436" for f in at_collapse.findings)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("bug", "step"),
    [("steplr-batch", 21), ("exp-batch", 22), ("multistep-batch", 11), ("steplr-micro", 18)],
)
def test_a_falling_schedule_is_named_once_the_run_trains_on_below_it(kind, bug, step):
    """An lr that only falls may spend a recipe's last third at 1% of its peak: a run that
    trains on below it for as long as it took to fall there names the collapse at its step;
    one a step shorter does not."""
    report = _run(kind, bug, 2 * step)
    first = _first(report, "GS436")
    assert first.steps == (step,) and "lr only falls" in first.evidence[-1]
    shorter = _run(kind, bug, 2 * step - 1)
    assert not any(f.rule == "GS436" for f in shorter.findings)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("bug", "names"),
    [
        ("replace-weight", ["head.weight"]),
        ("replace-head", ["head.weight", "head.bias"]),
        ("load-assign", ["body.", "head.weight"]),
    ],
)
def test_a_parameter_replaced_after_the_optimizer_is_named_at_step_one(kind, bug, names):
    report = _run(kind, bug)
    first = _first(report, "GS437")
    assert all(n in first.message for n in names)
    assert "optimizer0.group0.param" in first.evidence[0] and first.steps == (1,)
    assert all(f.explained_by for f in report.findings[1:])
    early = _run(kind, bug, 1)
    assert early.findings[0].rule == "GS437"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("bug", "names"),
    [
        ("replace-weight-mid", ["head.weight"]),
        ("replace-head-mid", ["head.weight", "head.bias"]),
        ("load-assign-mid", ["body.", "head.weight"]),
    ],
)
def test_a_parameter_replaced_after_step_5_is_named_at_step_6(kind, bug, names):
    """Replaced mid-run, the model's new tensors are found at the next step (torch's
    registration hooks, no walk of the model otherwise) and the optimizer's old ones are
    named as replaced: within one step of the replacement."""
    report = _run(kind, bug, 30)
    first = _first(report, "GS437")
    assert all(n in first.message for n in names) and first.steps == (6,)
    assert "(replaced after step 5)" in first.evidence[0]
    assert not any(f.rule == "GS417" for f in report.findings)  # the old tensors: this
    assert all(f.explained_by for f in report.findings[1:] if f.rule == "GS411")
    early = _run(kind, bug, 7)  # two steps after the replacement
    assert early.findings[0].rule == "GS437"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("bug", ["load-copy-mid", "add-group-mid", "identity-mid"])
def test_look_alikes_of_a_replacement_mid_run_give_no_warning(kind, bug):
    """Loaded in place, replaced and given to the optimizer, a module without parameters
    attached: the model changed or was reloaded, and every tensor it holds is trained."""
    report = _run(kind, bug, 30)
    loud = [f for f in report.findings if f.severity >= Severity.WARNING]
    assert loud == [], [f.message for f in loud]


@pytest.mark.parametrize("kind", KINDS)
def test_a_summed_loss_under_sgd_is_the_cause_of_its_blow_up(kind):
    report = _run(kind, "sum-sgd")
    first = _first(report, "GS438")
    assert "sum over 256 targets" in first.message and "effective lr of 25.6" in first.message
    assert not any(f.rule == "GS419" for f in report.findings)  # not "lower the lr" alone
    assert all(f.explained_by == "GS438:loss" for f in report.findings[1:])


@pytest.mark.parametrize("kind", KINDS)
def test_a_loss_divided_twice_under_accumulation_is_named_at_step_one(kind):
    report = _run(kind, "twice-sgd")
    first = _first(report, "GS438")
    assert "divided by the 4 accumulation steps twice" in first.message
    assert "4× smaller" in first.message
    early = _run(kind, "twice-sgd", 1)
    assert early.findings[0].rule == "GS438"


def test_the_schedulers_and_the_wiped_calls_are_in_the_json():
    doc = _run("lm", "steplr-micro").to_dict()
    (info,) = doc["summary"]["per_optimizer"][0]["schedulers"]
    assert info["kind"] == "StepLR" and info["per_step"] == pytest.approx(4, rel=0.05)
    steps = _run("lm", "zero-inside").to_dict()["steps"]
    assert steps[0]["wiped"] is None and steps[1]["wiped"] == 3
