"""The critical-batch-size line says only what its numbers hold: an estimate whose spread
is larger than itself is not resolved, and gradients never reset (no zero_grad) are named,
not blamed on the batch size. Fabricated steps, and one watched loop without zero_grad."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from watch_scripts import step_record

from gradscope.config import Thresholds
from gradscope.rules import step_batch
from gradscope.steps import noise
from gradscope.steps.records import ParamInfo, WatchRun

K = 4
"""Micro-batches per step."""


def measured(step: int, grad_sq: float, trace: float, **fields):
    """A step of K micro-batches whose unbiased estimates are (grad_sq, trace), per
    micro-batch: the small and big squared norms step_estimate inverts."""
    big = grad_sq + trace / K
    small = grad_sq + trace
    return step_record(
        step,
        math.sqrt(big),
        backward_calls=K,
        micro_batches=K,
        micro_sq=small,
        batch_samples=8,
        **fields,
    )


def run_of(records) -> WatchRun:
    params = (ParamInfo("w", (4, 4), True, True, 0.1),)
    return WatchRun("script train.py", params, tuple(records), "completed", 1.0)


def wild(n: int = 20):
    """|G|² alternating +1 and -0.9 (each step's estimate is noisy), trace about 3-5."""
    return [measured(i, 1.0 if i % 2 else -0.9, 3.0 if i % 2 else 5.0) for i in range(1, n + 1)]


def steady(n: int = 20, trace: float = 3.0):
    return [measured(i, 1.0, trace) for i in range(1, n + 1)]


def test_an_estimate_smaller_than_its_spread_is_not_resolved():
    (s,) = noise.summaries(wild(), 1)
    assert s.critical is not None and s.spread is not None and s.spread > s.critical
    assert not s.resolved and s.to_dict()["resolved"] is False
    line = s.line()
    assert line.startswith("critical batch size not resolved: B_simple ")
    assert "≈" not in line and "spread larger than itself" in line
    assert "this run uses 32 (4 micro-batches per step)" in line


def test_a_steady_estimate_is_stated_as_one():
    (s,) = noise.summaries(steady(), 1)
    assert s.resolved and s.critical == pytest.approx(24.0)  # 3 per micro-batch x 8 samples
    assert s.line().startswith("critical batch size ≈ 24 ± 0 samples (B_simple, steps 1-20)")


@pytest.mark.parametrize("factor", [1.0, 0.5])
def test_gs430_never_fires_on_an_unresolved_estimate(factor):
    t = Thresholds(noise_scale_factor=factor)  # any batch would be "far" from it
    assert step_batch.batch_vs_noise(run_of(wild()), t) == []
    assert step_batch.batch_vs_noise(run_of(steady(trace=5000.0)), t)  # resolved: it may


def carrying(records, every: int = 1):
    """The same steps, their gradients never reset: carried over from the step before."""
    out = []
    for r in records:
        carried = 0.5 * r.grad_norm if r.step > 1 and r.step % every == 0 else None
        out.append(
            measured(r.step, 1.0, 5000.0, carried_norm=carried, micro_param_sq=(r.micro_sq,))
        )
    return out


def test_gradients_never_reset_are_named_not_blamed_on_the_batch():
    records = carrying(steady())
    (s,) = noise.summaries(records, 1)
    assert s.critical is None and s.reason == noise.NOT_RESET
    assert "not reset" in s.line() and "zero_grad()" in s.line()
    assert step_batch.batch_vs_noise(run_of(records), Thresholds()) == []
    assert [p.step for p in noise.series(records)] == [1]  # nor does the plot, after step 1


def test_an_occasional_carried_step_is_left_out_not_the_run():
    records = carrying(steady(30), every=10)  # steps 10, 20, 30 carried
    (s,) = noise.summaries(records, 1)
    assert s.reason is None and s.steps == 27 and s.resolved
    assert [p.step for p in noise.series(records)][-1] == 29


def test_layer_noise_skips_carried_steps():
    layers = noise.LayerNoise()
    for r in carrying(steady(4))[1:]:  # steps 2-4, all carried
        layers.add(r)
    assert layers.grad_sq == [] and layers.optimizer is None


def test_a_watched_loop_without_zero_grad_says_so_in_the_noise_line():
    import torch
    from torch import nn

    import gradscope

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    with gradscope.watch() as w:
        for _ in range(12):
            for _ in range(K):
                x = torch.randn(8, 8)
                (nn.functional.mse_loss(model(x), x.sum(1, keepdim=True).sin()) / K).backward()
            opt.step()  # and never opt.zero_grad()
    rules = {f.rule for f in w.report.findings}
    assert "GS412" in rules and "GS430" not in rules
    (summary,) = w.report.summary()["noise_scale"]
    assert summary["reason"] == noise.NOT_RESET and summary["critical_batch"] is None


def _of(step: int, k: int, grad_sq: float = 1.0, trace: float = 3.0):
    """A step of k micro-batches of 8 samples whose estimates are (grad_sq, trace)."""
    return step_record(
        step,
        math.sqrt(grad_sq + trace / k),
        backward_calls=k,
        micro_batches=k,
        micro_sq=grad_sq + trace,
        batch_samples=8,
    )


@pytest.mark.parametrize(
    ("counts", "says"),
    [
        ((2, 4, 8), "this run's steps use 2 to 8 micro-batches (16-64 samples)"),
        ((8, 8, 2), "this run's steps use 2 to 8 micro-batches (16-64 samples)"),
        ((4, 16), "this run's steps use 4 to 16 micro-batches (32-128 samples)"),
    ],
)
def test_accumulation_counts_that_change_are_not_one_batch(counts, says):
    """The last step's count is not the run's batch: the range is, and nothing is judged
    against a batch the run did not have."""
    records = [_of(i, counts[i % len(counts)]) for i in range(1, 41)]
    (s,) = noise.summaries(records, 1)
    assert s.batch is None and s.micro_range == (min(counts), max(counts))
    line = s.line()
    assert f"{says}, not one batch size" in line and "this run uses" not in line
    assert s.to_dict()["micro_batches_range"] == [min(counts), max(counts)]
    assert step_batch.batch_vs_noise(run_of(records), Thresholds()) == []


def test_one_accumulation_count_still_states_its_batch_and_how_it_was_read():
    records = [_of(i, 4) for i in range(1, 41)]
    (s,) = noise.summaries(records, 1)
    assert s.micro_range is None and s.batch == 32 and "this run uses 32" in s.line()
    assert "samples per micro-batch read as the model input's dim 0, or stated" in s.line()
    how = "read as dim 1 of the input of `rnn` (LSTM, batch_first=False)"
    (s,) = noise.summaries(records, 1, (how,))
    assert f"samples per micro-batch {how}: 8" in s.line() and s.to_dict()["batch_read"] == how


def test_a_batch_that_could_not_be_read_states_no_samples():
    records = [replace(_of(i, 4), batch_samples=None) for i in range(1, 41)]
    why = "could not be read: the sequence-first modules disagree (`a` sees 6, `b` sees 35)"
    (s,) = noise.summaries(records, 1, (why,))
    assert s.unit == "micro-batches" and s.batch == 4
    assert s.to_dict()["samples_per_micro_batch"] is None and s.to_dict()["batch_read"] == why
    assert s.line().endswith(f"; the batch size {why}: give --batch-size")
    assert "samples" not in s.line().replace(why, "")
