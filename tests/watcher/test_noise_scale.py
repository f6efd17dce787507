"""The gradient noise scale `watch` measures, against a brute-force reference the test
computes from independent micro-batch gradients at the same (fixed) weights."""

from __future__ import annotations

import json
import math

import pytest
import torch
from torch import nn

import gradscope
from gradscope.findings import Severity
from gradscope.steps import noise


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))


class _CNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.head = nn.Linear(4 * 6 * 6, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.conv(x)).flatten(1))


class _Transformer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(4, 16)
        self.block = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.head = nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.block(self.embed(x)).mean(1))


CASES = {  # model, input shape of one sample; the targets carry known noise (sigma)
    "mlp": (_mlp, (8,)),
    "cnn": (_CNN, (1, 6, 6)),
    "transformer": (_Transformer, (5, 4)),
}
SIGMA = 0.5
OFFSET = 0.75
"""A mean the fresh models miss: B_simple of 5-22 samples, measurable with 8 × 8."""


def _data(gen: torch.Generator, shape: tuple[int, ...], n: int) -> tuple[torch.Tensor, ...]:
    x = torch.randn((n, *shape), generator=gen)
    y = OFFSET + x.flatten(1).sum(1, keepdim=True).sin() + SIGMA * torch.randn(n, 1, generator=gen)
    return x, y


def _micro_grads(model: nn.Module, shape: tuple[int, ...], b: int, m: int) -> torch.Tensor:
    """[m, params] gradients of m independent micro-batches of b samples (brute force)."""
    gen = torch.Generator().manual_seed(123)
    params = list(model.parameters())
    rows = []
    for _ in range(m):
        x, y = _data(gen, shape, b)
        loss = nn.functional.mse_loss(model(x), y)
        rows.append(torch.cat([g.flatten() for g in torch.autograd.grad(loss, params)]))
    return torch.stack(rows).double()


def _reference(grads: torch.Tensor, b: int) -> tuple[float, float, float]:
    """(|G|², tr(Σ) per sample, B_simple in samples) from independent micro gradients."""
    m = grads.shape[0]
    trace_micro = float(grads.var(0, unbiased=True).sum())  # tr(Σ)/b
    grad_sq = float(grads.mean(0).square().sum()) - trace_micro / m
    return grad_sq, trace_micro * b, trace_micro * b / grad_sq


def _train(model: nn.Module, shape: tuple[int, ...], b: int, k: int, steps: int, seed: int):
    """A plain accumulation loop at lr 0 (the weights stay where the reference is)."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    seen = []
    for _ in range(steps):
        for _ in range(k):
            x, y = _data(gen, shape, b)
            loss = nn.functional.mse_loss(model(x), y) / k
            loss.backward()
        seen.append([p.grad.detach().clone() for p in model.parameters()])
        opt.step()
        opt.zero_grad()
    return seen


@pytest.mark.parametrize("held", [False, True])
def test_one_step_of_64_micro_batches_is_the_sample_covariance_exactly(held, monkeypatch):
    """At fixed weights the per-step estimates are the unbiased sample statistics of the
    step's own 64 micro-batch gradients, to rounding. `held`: the accelerator's way (the
    first micro-batch read from .grad, the others held and normed at the call's end, in
    chunks of a few hundred bytes here), run on the CPU."""
    from gradscope.watcher import noise_scale

    monkeypatch.setattr(noise_scale, "HELD_BYTES", 300)
    monkeypatch.setattr(noise_scale.MicroGrads, "eager_cpu", not held)
    torch.manual_seed(0)
    model = _mlp()
    k, b = 64, 4
    gen = torch.Generator().manual_seed(7)
    batches = [_data(gen, (8,), b) for _ in range(2 * k)]
    params = list(model.parameters())
    grads = []
    for x, y in batches[k:]:  # step 2's micro-batches, brute force
        g = torch.autograd.grad(nn.functional.mse_loss(model(x), y), params)
        grads.append(torch.cat([t.flatten() for t in g]))
    g = torch.stack(grads).double()
    opt = torch.optim.SGD(params, lr=0.0)
    with gradscope.watch() as w:
        for step in range(2):
            for x, y in batches[step * k : (step + 1) * k]:
                (nn.functional.mse_loss(model(x), y) / k).backward()
            opt.step()
            opt.zero_grad()
    first, second = w.run.steps
    assert first.micro_batches == 0  # hooks go on at the first step
    assert second.micro_batches == k and second.batch_samples == b
    assert second.micro_sq == pytest.approx(
        float(g.square().sum(1).mean()), rel=1e-5
    )  # float32 gradients
    assert second.grad_norm**2 == pytest.approx(
        float(g.mean(0).square().sum()), rel=1e-5
    )  # float32 gradients
    grad_sq, trace = noise.step_estimate(second)
    assert trace == pytest.approx(float(g.var(0, unbiased=True).sum()), rel=1e-6)
    assert grad_sq == pytest.approx(float(g.mean(0).square().sum()) - trace / k, rel=1e-6)


@pytest.mark.parametrize(
    "case", [c if c == "mlp" else pytest.param(c, marks=pytest.mark.slow) for c in CASES]
)
def test_smoothed_estimate_within_25_percent_of_the_reference(case):
    make, shape = CASES[case]
    torch.manual_seed(1)
    model = make()
    b, k = 8, 8
    _, _, expected = _reference(_micro_grads(model, shape, b, 1024), b)
    with gradscope.watch() as w:
        _train(model, shape, b, k, steps=101, seed=5)
    (summary,) = noise.summaries(w.run.steps, 1)
    assert summary.unit == "samples" and summary.micro_batches == k and summary.batch == k * b
    assert summary.steps == 100 and summary.critical is not None
    assert summary.critical == pytest.approx(expected, rel=0.25), (summary, expected)
    assert w.report.summary()["noise_scale"][0]["critical_batch"] == summary.critical


def test_a_batch_far_above_the_critical_batch_is_information_and_a_near_one_is_not():
    """GS430: 64 micro-batches of 8 samples where B_simple is about 9 samples (the
    reference of 256 independent gradients) is 50x over: information naming both numbers;
    8 micro-batches (7x) are within noise-scale-factor and say nothing."""
    torch.manual_seed(1)
    model = _mlp()
    _, _, expected = _reference(_micro_grads(model, (8,), 8, 256), 8)
    found = {}
    for k in (64, 8):
        with gradscope.watch() as w:
            _train(model, (8,), 8, k, steps=20, seed=5)
        found[k] = [f for f in w.report.findings if f.rule == "GS430"]
    (f,) = found[64]
    assert f.severity is Severity.INFO and f.value == 512
    assert "the batch of 512 samples" in f.message and "critical batch size" in f.message
    critical = noise.summaries(w.run.steps, 1)[0].critical
    assert critical == pytest.approx(expected, rel=0.25)
    assert found[8] == []


def test_one_backward_per_step_says_why_and_guesses_nothing():
    model = _mlp()
    with gradscope.watch() as w:
        _train(model, (8,), 8, 1, steps=12, seed=0)
    assert all(r.micro_batches == 0 and r.micro_sq is None for r in w.run.steps)
    (summary,) = noise.summaries(w.run.steps, 1)
    assert summary.critical is None and summary.reason == noise.NEEDS_TWO
    assert "needs >= 2 micro-batches" in w.report.summary()["noise_scale"][0]["reason"]


def test_hooks_go_on_only_once_a_step_has_several_backward_calls():
    """One backward per step costs no hook; from the first step of micro-batches on
    (here step 4: it measures nothing, its hooks go on at its end), every step is
    measured, against the sum of the squared norms of its micro gradients (autograd)."""
    model = _mlp()
    params = list(model.parameters())
    gen = torch.Generator().manual_seed(2)
    opt = torch.optim.SGD(params, lr=0.0)
    expected = []
    with gradscope.watch() as w:
        for step in range(6):
            k = 1 if step < 3 else 3
            total = 0.0
            for _ in range(k):
                x, y = _data(gen, (8,), 4)
                loss = nn.functional.mse_loss(model(x), y) / k
                grads = torch.autograd.grad(loss, params, retain_graph=True)
                total += sum(float(g.double().square().sum()) for g in grads)
                loss.backward()
            expected.append(total)
            opt.step()
            opt.zero_grad()
            if step == 2:
                assert not w.state.noise.wanted  # no hook in the steps of one backward
    assert [r.micro_batches for r in w.run.steps] == [0, 0, 0, 0, 3, 3]
    for r, want in zip(w.run.steps[4:], expected[4:], strict=True):
        assert r.micro_sq == pytest.approx(3 * want, rel=1e-5)  # k·Σ|h_i|², float32 grads


def test_stated_batch_size_and_unscaled_under_gradscaler():
    """GradScaler's scaled micro gradients are unscaled; a stated batch size wins."""
    torch.manual_seed(0)
    model = _mlp()
    gen = torch.Generator().manual_seed(3)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    with gradscope.watch(batch_size=5) as w:
        for _ in range(3):
            for _ in range(2):
                x, y = _data(gen, (8,), 8)
                scaler.scale(nn.functional.mse_loss(model(x), y) / 2).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
    r = w.run.steps[-1]
    assert r.micro_batches == 2 and r.batch_samples == 5
    # two micro gradients average to the step's: mean |g_j|² >= |G|², same scale
    assert r.grad_norm**2 <= r.micro_sq < 4 * r.grad_norm**2


def test_different_call_sites_or_a_reset_between_micro_batches_are_not_measured():
    """A GAN-like step (two losses, two lines) and a zero_grad between micro-batches
    are not micro-batches of one loss: no estimate."""
    model = _mlp()
    gen = torch.Generator().manual_seed(0)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    with gradscope.watch() as w:
        for step in range(4):
            x, y = _data(gen, (8,), 8)
            nn.functional.mse_loss(model(x), y).backward()
            if step % 2:
                opt.zero_grad()
            model(x).abs().mean().backward()
            opt.step()
            opt.zero_grad()
    assert [r.micro_batches for r in w.run.steps] == [0, 0, 0, 0]
    assert w.report.noise[0].reason == noise.NOT_ONE_LOSS


def test_noise_helpers_on_plain_numbers():
    from gradscope.steps.records import StepRecord

    def rec(step: int, small: float, big: float, k: int = 4) -> StepRecord:
        return StepRecord(
            step,
            0,
            1.0,
            math.sqrt(big),
            None,
            None,
            (0.1,),
            k,
            None,
            False,
            None,
            (),
            micro_batches=k,
            micro_sq=small,
        )

    # E|g_b|² = |G|² + tr/b: |G|² = 1, tr(Σ)/b = 3 with K = 4 gives small 4, big 1.75
    steps = [rec(i, 4.0, 1.75) for i in range(1, 21)]
    (summary,) = noise.summaries(steps, 1)
    assert summary.unit == "micro-batches" and summary.critical == pytest.approx(3.0)
    assert summary.spread == pytest.approx(0.0, abs=1e-9)  # every step measured the same
    assert "critical batch size ≈ 3 ± 0 micro-batches (B_simple, steps 1-20)" in summary.line()
    assert noise.series(steps)[-1].b_simple == pytest.approx(3.0)
    lost = [rec(i, 4.0, 0.9) for i in range(1, 21)]  # |G|² estimate below 0
    (summary,) = noise.summaries(lost, 1)
    assert summary.critical is None and "not resolved" in str(summary.reason)


@pytest.mark.slow
def test_log_tensorboard_and_plot_carry_the_smoothed_series(tmp_path):
    log = tmp_path / "steps.jsonl"
    model = _mlp()
    with gradscope.watch(log=str(log)) as w:
        _train(model, (8,), 8, 4, steps=15, seed=0)
    series = {p["step"]: p["b_simple"] for p in w.report.to_dict()["noise_scale"]["series"]}
    assert sorted(series) == list(range(2, 16)) and all(v > 0 for v in series.values())
    lines = [json.loads(line) for line in log.read_text().splitlines()[1:]]
    logged = {x["step"]: x["b_simple"] for x in lines if "b_simple" in x}
    assert logged == pytest.approx(series, rel=1e-12)
    assert all(x["micro_batches"] == 4 and x["batch_samples"] == 8 for x in lines[1:-1])
    assert "findings" in lines[-1]

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from gradscope.report import watch_plot

    fig = watch_plot._figure(plt, w.report, 400)
    panel = next(ax for ax in fig.axes if ax.get_ylabel().startswith("critical batch"))
    steps, values = panel.get_lines()[0].get_data()
    assert list(steps) == sorted(series) and list(values) == pytest.approx(
        [series[s] for s in sorted(series)]
    )
    plt.close(fig)

    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from gradscope.sinks.attached import ending_of
    from gradscope.sinks.series import Series
    from gradscope.sinks.tensorboard_sink import TensorboardSink

    sink = TensorboardSink(str(tmp_path / "tb"))  # fed as a run's read-backs feed it
    sink.steps(Series().of(list(w.run.steps)))
    assert sink.finished(ending_of(w.report)) is None
    events = EventAccumulator(str(tmp_path / "tb"), size_guidance={"scalars": 0})
    events.Reload()
    written = {e.step: e.value for e in events.Scalars("noise_scale/b_simple")}
    assert written == pytest.approx(series, rel=1e-6)


def test_a_model_pickled_or_copied_while_watched_carries_no_hook(tmp_path):
    """torch.save(model) and copy.deepcopy (an EMA copy) in the script: no gradscope hook
    is pickled or copied, and no warning is given about them."""
    import copy
    import warnings

    model = _mlp()
    with gradscope.watch() as w, warnings.catch_warnings():
        warnings.simplefilter("error")
        _train(model, (8,), 8, 2, steps=3, seed=0)
        assert model._forward_pre_hooks and model[0].weight._backward_hooks  # watched
        torch.save(model, tmp_path / "model.pt")
        twin = copy.deepcopy(model)
    assert w.run.steps[-1].micro_batches == 2
    loaded = torch.load(tmp_path / "model.pt", weights_only=False)
    for m in (loaded, twin):
        assert not m._forward_pre_hooks and not m._forward_pre_hooks_with_kwargs
        assert not m[0].weight._backward_hooks
    assert not model._forward_pre_hooks and not model[0].weight._backward_hooks  # removed
