"""Recorder.flush: Ctrl-C cannot split the records from the --log, a failed read-back keeps
its steps pending."""

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
