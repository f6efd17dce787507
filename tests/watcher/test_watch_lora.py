"""LoRA with peft on a tiny Llama under gradient checkpointing, watched as written: each
step's embedding output is a leaf made to require grad (no parameter outside the
optimizer: GS411), and the B matrices start at zero (their ‖Δw‖/‖w‖ of 1/t is no high
learning rate: GS419). At 10× the learning rate the A matrices are rewritten every few
steps and the loss does not move: GS419 says so."""

from __future__ import annotations

import os

import pytest

from gradscope.findings import Severity

pytestmark = pytest.mark.slow
SCRIPT = os.path.join(os.path.dirname(__file__), "domain_scripts", "lora_checkpointing.py")


def _watched(*argv: str):
    pytest.importorskip("peft")
    from gradscope.watcher import watch_script

    return watch_script(SCRIPT, list(argv))


def test_lora_with_gradient_checkpointing_is_silent():
    report = _watched()
    assert [f for f in report.findings if f.severity >= Severity.WARNING] == [], report.findings


def test_lora_at_ten_times_the_lr_is_told_so():
    report = _watched("3e-2")
    (f,) = [f for f in report.findings if f.rule == "GS419"]
    assert "median of 14" in f.message  # the A matrices only: the B ones grew from zero
    assert all(f.rule != "GS411" for f in report.findings)
