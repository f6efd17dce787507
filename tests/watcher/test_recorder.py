"""Recorder.flush: Ctrl-C cannot split the records from the --log, a failed read-back keeps
its steps pending."""

import math
import signal

import pytest
import torch

from gradscope.watcher.recorder import PendingStep, Recorder


def _step(n: int) -> PendingStep:
    return PendingStep(
        step=n,
        optimizer=0,
        lrs=(0.1,),
        backward_calls=1,
        skipped=False,
        param_norm=torch.tensor([float(n), 2.0]),
        loss=torch.tensor(1.0 / n),
    )


def test_ctrl_c_during_the_log_write_arrives_after_every_record_is_logged():
    logged: list[int] = []

    def log(records):
        for i, r in enumerate(records):
            if i == 1:
                signal.raise_signal(signal.SIGINT)  # the user's Ctrl-C, mid-write
            logged.append(r.step)

    recorder = Recorder(flush_every=100, on_records=log)
    for n in range(1, 6):
        recorder.add(_step(n))
    with pytest.raises(KeyboardInterrupt):
        recorder.flush()
    assert logged == [r.step for r in recorder.records] == [1, 2, 3, 4, 5]
    assert recorder.pending == []
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_failed_read_back_keeps_its_steps_pending():
    def broken(sq):
        raise RuntimeError("device lost")

    recorder = Recorder(flush_every=100, finalise=broken)
    for n in range(1, 4):
        recorder.add(_step(n))
    with pytest.raises(RuntimeError):
        recorder.flush()
    assert len(recorder.pending) == 3 and recorder.records == []


def test_fast_steps_read_back_at_most_every_interval_and_collective_ones_every_n(monkeypatch):
    """flush_every steps read back unless the last read-back was under
    MIN_FLUSH_INTERVAL_S ago (then at most 100 × flush_every steps wait); a recorder
    with finalisers (collective read-backs, the same steps on every rank) never waits."""
    from gradscope.watcher import recorder as recorder_mod

    monkeypatch.setattr(recorder_mod, "MIN_FLUSH_INTERVAL_S", 3600.0)
    fast = Recorder(flush_every=2)
    for n in range(1, 200):
        fast.add(_step(n))
    assert len(fast.records) == 0 and len(fast.pending) == 199
    fast.add(_step(200))
    assert len(fast.records) == 200 and fast.pending == []  # 100 × flush_every
    collective = Recorder(flush_every=2, finalise=lambda sq: sq)
    for n in range(1, 6):
        collective.add(_step(n))
    assert len(collective.records) == 4 and len(collective.pending) == 1
    monkeypatch.setattr(recorder_mod, "MIN_FLUSH_INTERVAL_S", 0.0)
    fast.add(_step(201))
    fast.add(_step(202))
    assert len(fast.records) == 202


def _clipped(**kw) -> PendingStep:
    base = dict(
        step=1,
        optimizer=0,
        lrs=(0.1,),
        backward_calls=1,
        skipped=False,
        param_norm=torch.tensor([3.0, 4.0, 12.0], dtype=torch.float64),
        members=(0, 1),
    )
    return PendingStep(**{**base, **kw})


def _one(step: PendingStep):
    recorder = Recorder()
    recorder.add(step)
    recorder.flush()
    return recorder.records[0]


def test_grad_norm_is_the_stepping_optimizers_l2_whatever_the_clip_norm():
    r = _one(_clipped(grad_norm=torch.tensor(4.0), max_norm=2.0, norm_type=math.inf))
    assert r.grad_norm == 5.0  # its parameters 0 and 1, not parameter 2
    assert r.clip_total == 4.0 and r.norm_type == math.inf and r.clipped
    assert r.clipped_norm == pytest.approx(5.0 * 2.0 / 4.0)  # torch's coefficient, inf-norm
    assert r.to_dict()["norm_type"] == math.inf


def test_a_clip_of_scaled_gradients_compared_max_norm_with_the_scaled_total():
    r = _one(
        _clipped(
            grad_norm=torch.tensor(5.0),
            max_norm=100.0,
            norm_type=2.0,
            scaled_clip=True,
            clip_scale=torch.tensor(1024.0),
        )
    )
    assert r.grad_norm == 5.0 and r.clip_total == 5.0 and r.scaled_clip
    assert r.clipped  # 5 x 1024 > 100, though 5 < 100
    assert r.clipped_norm == pytest.approx(5.0 * 100.0 / 5120.0)
    assert r.clip_scale == 1024.0


def test_norms_beyond_float32_range_stay_finite():
    big = torch.tensor([1e30, 1e25], dtype=torch.float64)
    r = _one(_clipped(param_norm=big, members=None))
    assert r.param_norms == (1e30, 1e25)
    assert r.grad_norm == pytest.approx(1e30)
