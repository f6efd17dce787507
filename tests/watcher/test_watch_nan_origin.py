"""Where a NaN is made in the backward of a finite loss (GS433), and weights gone NaN under a
finite loss (GS434), in a real small training loop (scripts/nan_backward.py): a sqrt at 0,
acos at ±1, a log torch.where drops, a root a mask multiplies by 0. Under SGD the update
writes the NaN into the weights at once, so no later backward can be blamed: the weights are
named with the command that replays the step, first in the report (GS401 is what they cause).
Under a GradScaler that skips every step the weights stay finite, and the next backward
names the op (the skip armed it). The safe versions of the same objectives say nothing, and
neither does a healthy model's opening scale search, whose scaled gradients overflow."""

from __future__ import annotations

import math
import sys

import pytest

from gradscope.findings import Severity
from gradscope.steps.records import StepRecord
from gradscope.steps.step_store import StepStore
from gradscope.watcher import nan_probe
from tests.watcher.watch_scripts import watched

pytestmark = pytest.mark.slow

KINDS = ["sqrt", "acos", "log", "pow"]
PARAMS = ("0.weight", "0.bias", "2.weight", "2.bias")


def _run(kind: str, mode: str, steps: int = 30):
    return watched("nan_backward.py", kind, mode, str(steps))


@pytest.mark.parametrize("kind", KINDS)
def test_weights_gone_nan_under_a_finite_loss_are_named_with_the_step_to_replay(kind):
    report = _run(kind, "sgd")
    gs434 = next(f for f in report.findings if f.rule == "GS434")
    assert gs434.severity == Severity.ERROR and gs434.steps == (1,)
    assert "the loss was finite at step 1 but its gradients were not" in gs434.message
    # known at step 1's own record (its gradient norms, read at once on a CPU), so step
    # 2's backward reads the weights: not the tenth step's read-back
    assert gs434.message.endswith("4 tensor(s) held NaN/Inf by step 1")
    assert gs434.evidence[0] == "non-finite weights: " + ", ".join(PARAMS)
    assert f"--step 1 -- {kind} sgd 30`" in gs434.advice
    # the weights were NaN when a later backward could be watched: no op is blamed
    assert report.run.backward_nan is None
    assert not any(f.rule == "GS433" for f in report.findings)
    # the mechanism leads; the non-finite losses and gradients it causes follow it
    assert report.findings[0] is gs434, [(f.rule, f.explained_by) for f in report.findings]
    gs401 = next(f for f in report.findings if f.rule == "GS401")
    assert gs401.explained_by == f"GS434:{gs434.subject}"


ORIGINS = [
    ("sqrt", "sqrt (SqrtBackward0)", False),
    ("acos", "acos (AcosBackward0)", False),
    ("log", "log (LogBackward0)", True),
    ("pow", "pow (PowBackward0)", True),
]


@pytest.mark.parametrize(("kind", "op", "masked"), ORIGINS)
def test_a_nan_made_in_the_backward_while_the_weights_stay_finite_names_its_op(kind, op, masked):
    report = _run(kind, "scaler")
    first = report.findings[0]
    assert first.rule == "GS433" and first.severity == Severity.ERROR, [
        (f.rule, f.message) for f in report.findings
    ]
    assert first.message.startswith(f"the backward of {op} made the first non-finite gradient")
    assert "first seen at step 1, the loss finite" in first.message
    assert ("its incoming gradient was 0 where it made NaN" in first.message) == masked
    assert ("torch.where(mask, x, 1)" in first.advice) == masked
    # GradScaler's skip of step 1 armed the probe: step 2's backward named it
    assert first.steps == (1, 2) and "--step 2 -- " in first.advice
    assert "its gradient flows to 2.bias, 2.weight" in first.evidence[-1]
    # GradScaler's skips and its collapsing scale are what the NaN causes
    assert all(f.explained_by == f"GS433:{first.subject}" for f in report.findings[1:])
    assert report.run.weights_nan is None


@pytest.mark.parametrize("mode", ["sgd", "scaler"])
@pytest.mark.parametrize("kind", [f"safe-{k}" for k in KINDS])
def test_the_safe_versions_of_the_same_objectives_say_nothing(kind, mode):
    report = _run(kind, mode)
    loud = [f for f in report.findings if f.severity >= Severity.WARNING]
    assert loud == [], [f.message for f in loud]
    assert report.run.backward_nan is None and report.run.weights_nan is None


@pytest.mark.parametrize(
    ("mode", "reader"), [("scaler", "grad_scaler.py"), ("sgd", "nan_probe.py")]
)
def test_the_probe_reads_its_flags_back_where_the_run_already_waits(monkeypatch, mode, reader):
    """Armed by GradScaler's skip, the watched backward's flags are read once, inside the
    GradScaler.step that has just read found_inf on the host, not when the backward
    returns; armed by the recorder's read-back (no scaler), when it returns."""
    reads = []
    real = nan_probe.judge

    def judge(probe, state):
        if probe.pending:
            reads.append((sys._getframe(1).f_code.co_filename, state.steps))
        real(probe, state)

    monkeypatch.setattr(nan_probe, "judge", judge)
    _run("sqrt", mode, 14)
    assert len(reads) == 1 and reads[0][0].endswith(reader), reads
    # under the scaler: after step 2 was recorded (skipped too), before step 3 began
    assert mode != "scaler" or reads[0][1] == 2


@pytest.mark.parametrize(("kind", "op", "masked"), ORIGINS)
@pytest.mark.parametrize("mode", ["search", "search-long"])
def test_a_nan_made_in_the_backward_under_an_overflowing_scale_is_still_named(
    kind, op, masked, mode
):
    """The scale overflows too at first: the op that makes NaN/Inf at any scale is named at
    the next step, the nodes that only overflowed are not."""
    report = _run(kind, mode, 12)
    first = report.findings[0]
    assert first.rule == "GS433" and first.steps == (1, 2), [
        (f.rule, f.message) for f in report.findings
    ]
    assert first.message.startswith(f"the backward of {op} made")
    assert report.run.backward_nan is not None and report.run.backward_nan.masked == masked


@pytest.mark.parametrize("mode", ["search", "search-long"])
@pytest.mark.parametrize("kind", [f"safe-{k}" for k in KINDS])
def test_a_healthy_models_opening_scale_search_is_not_a_nan_origin(kind, mode):
    """GradScaler starting too high skips its first steps (safe-sqrt: 3 and 10 of them):
    each skip arms the probe, the watched backward only overflowed, nothing is named."""
    report = _run(kind, mode)
    assert not any(f.rule in ("GS433", "GS434", "GS401") for f in report.findings), [
        (f.rule, f.message) for f in report.findings
    ]
    assert report.run.backward_nan is None and report.run.weights_nan is None


def test_a_nan_the_forward_made_is_not_probed():
    """A NaN batch makes the loss NaN: the forward made it (GS401 says so), no backward
    op and no 'finite loss' is claimed."""
    report = watched("nan_batch.py")
    assert any(f.rule == "GS401" for f in report.findings)
    assert not any(f.rule in ("GS433", "GS434") for f in report.findings)
    # no mechanism named: the symptom leads, explained by nothing
    gs401 = next(f for f in report.findings if f.rule == "GS401")
    assert report.findings[0] is gs401 and gs401.explained_by is None
    assert report.run.backward_nan is None and report.run.weights_nan is None


def _record(step: int, loss: float, norm: float, skipped: bool = False) -> StepRecord:
    from tests.watcher.watch_scripts import step_record

    return step_record(step, norm=norm, loss=loss, skipped=skipped)


def _store(*records: StepRecord) -> StepStore:
    return StepStore.of(records)


def test_the_probe_arms_at_the_first_nonfinite_gradient_of_a_finite_loss_only():
    inf = float("inf")
    probe = nan_probe.NanProbe()
    nan_probe.look(probe, _store(_record(1, 1.0, 1.0), _record(2, 0.9, inf), _record(3, 0.8, inf)))
    assert probe.seen == 2 and not probe.done
    first = nan_probe.NanProbe()  # the loss went first: the forward made it
    nan_probe.look(first, _store(_record(1, 1.0, 1.0), _record(2, float("nan"), inf)))
    assert first.seen is None and first.done


def test_gradscaler_finding_its_scale_is_not_probed_but_a_nan_at_every_step_is():
    inf = float("inf")
    calibrating = [_record(i, 1.0, inf, skipped=True) for i in range(1, nan_probe.SKIP_RUN)]
    probe = nan_probe.NanProbe()
    nan_probe.look(probe, _store(*calibrating, *(_record(i, 1.0, 1.0) for i in range(8, 30))))
    assert probe.seen is None and not probe.done
    always = [_record(i, 1.0, inf, skipped=True) for i in range(1, 20)]
    probe = nan_probe.NanProbe()
    store = _store(*always[:5])
    nan_probe.look(probe, store)
    assert probe.seen is None
    store.extend(always[5:])  # read back later: counted on from where it stopped
    nan_probe.look(probe, store)
    assert probe.seen == 1


def _hooked(loss, scale):
    """The probe's flags (out non-finite, in non-finite, masked, overflow) per node of one
    backward of `loss * scale`."""

    scaled = loss * scale
    probe = nan_probe.NanProbe(unscale=scale.reciprocal())
    for node in nan_probe._nodes(scaled.grad_fn):
        probe.handles.append(node.register_hook(nan_probe._hook(probe, node)))
    scaled.backward()
    for handle in probe.handles:
        handle.remove()
    return [(type(n).__name__, nan_probe._read([f])[0]) for n, f in probe.flags]


def test_an_overflow_of_the_scale_is_told_from_an_infinite_local_derivative():
    """sqrt at 0 makes Inf at any scale; sin(1e30 z)'s gradient × 1e10 only overflows."""
    import torch

    x = torch.tensor([0.0, 1.0], requires_grad=True)
    z = torch.tensor([0.5], requires_grad=True)
    flags = _hooked(x.sqrt().sum() + (z * 1e30).sin().sum(), torch.tensor(1e10))
    made = [(name, f[3]) for name, f in flags if f[0] and not f[1]]
    assert sorted(made) == [("MulBackward0", True), ("SqrtBackward0", False)], flags


def test_a_python_functions_backward_runs_once_and_is_judged_as_before():
    """The user's backward is never run again by the probe (its side effects are theirs)."""
    import torch

    calls = []

    class Big(torch.autograd.Function):
        @staticmethod
        def forward(ctx, v):
            return v * 1.0

        @staticmethod
        def backward(ctx, g):
            calls.append(1)
            return g * 1e30

    z = torch.tensor([0.5], requires_grad=True)
    flags = _hooked(Big.apply(z).sum(), torch.tensor(1e10))
    assert calls == [1]
    made = [(name, f[3]) for name, f in flags if f[0] and not f[1]]
    assert made == [("BigBackward", False)], flags


def _hurried(loss, norms, skipped=False, dtype=None):
    from types import SimpleNamespace

    import torch

    probe, recorder = nan_probe.NanProbe(), SimpleNamespace(hurry=False)
    step = SimpleNamespace(skipped=skipped, loss=loss, param_norm=torch.tensor(norms, dtype=dtype))
    nan_probe.early(probe, recorder, step)
    assert probe.hurried == recorder.hurry
    return recorder.hurry


def test_a_steps_nonfinite_gradients_under_a_finite_loss_hurry_the_read_back():
    """Known at the step's own record on a CPU (no device to wait for): the recorder reads
    back at once, so the next backward is the one the probe watches. Not for a loss that
    is NaN too (the forward's: GS401), nor a step GradScaler skipped, nor finite norms."""
    import torch

    nan = math.nan
    assert _hurried(torch.tensor(0.5), [1.0, nan])
    assert _hurried(0.5, [math.inf, -1.0])  # -1: a tensor without a gradient
    assert not _hurried(torch.tensor(nan), [1.0, nan])
    assert not _hurried(None, [1.0, nan])
    assert not _hurried(torch.tensor(0.5), [1.0, nan], skipped=True)
    assert not _hurried(torch.tensor(0.5), [1.0, nan], skipped=torch.tensor(1.0))
    assert _hurried(torch.tensor(0.5), [1.0, nan], skipped=torch.tensor(0.0))
    assert not _hurried(torch.tensor(0.5), [1.0, 2.0, -1.0])


def test_a_healthy_cpu_steps_early_flag_costs_one_small_op():
    """The flag is asked at every step: on a CPU a healthy step's answer is one sum of its
    norms read at once (not six ops), and the loss is read only where a norm is not
    finite. A sum that overflows where every norm is finite hurries nothing."""
    import torch
    from torch.overrides import TorchFunctionMode

    calls: list[str] = []

    class Count(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            calls.append(getattr(func, "__name__", str(func)))
            return func(*args, **(kwargs or {}))

    with Count():
        assert not _hurried(torch.tensor(0.5), [1.0, 2.0, -1.0])
    assert [c for c in calls if c not in ("tensor", "__get__")] == ["sum", "item"]
    big = 1.7e308  # float64 norms, each finite, whose sum is not
    assert not _hurried(torch.tensor(0.5), [big, big], dtype=torch.float64)
    assert not _hurried(math.inf, [1.0, math.nan])
    assert not _hurried(torch.tensor(0.5), [])
    assert _hurried(torch.tensor([0.5]), [-1.0, -math.inf])
