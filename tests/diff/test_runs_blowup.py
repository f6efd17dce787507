"""diff of two runs where one blew up: say where it really started and where it went, and
judge a loss that rose by orders of magnitude as an error, not as a converged checkpoint."""

from __future__ import annotations

import math

from runs_logs import write

from gradscope.diff.runs import RunsOptions, diff_logs
from gradscope.findings import Severity
from gradscope.report import diff_runs_terminal
from gradscope.report.console import View

STEPS = list(range(1, 201))


def blowing_up(step, norms, loss):
    """From 29.4 at step 1 the loss grows ×1.1 a step: 2.4e+06 by step 120, ~1e+10 at 200."""
    return [n * 1.1**step for n in norms], 29.4 * 1.1 ** (step - 1)


def test_a_blown_up_run_is_an_error_that_says_where_it_started(tmp_path):
    ref = write(tmp_path / "ref.jsonl", STEPS)
    new = write(tmp_path / "new.jsonl", STEPS, change=blowing_up)
    result = diff_logs(str(ref), str(new), RunsOptions(rtol=1e9))
    (flag,) = [f for f in result.findings if f.rule == "GS608"]
    assert flag.severity is Severity.ERROR and flag.subject.startswith("new")
    assert "the loss blew up: it started at 29.4 (step 1) and went to" in flag.message
    assert "less than 5%" not in flag.message and "diverged" in flag.advice
    assert result.outcome().failed(Severity.ERROR)
    text = diff_runs_terminal.render(result, View(80, False, 30))
    assert "started at 29.4 (step 1)" in text


def test_a_loss_that_rose_a_little_stays_a_warning(tmp_path):
    def rising(step, norms, loss):
        return norms, 2.0 * (1 + step / 400)  # 2.0 → 3.0: did not fall, did not blow up

    ref = write(tmp_path / "ref.jsonl", STEPS)
    new = write(tmp_path / "new.jsonl", STEPS, change=rising)
    result = diff_logs(str(ref), str(new), RunsOptions(rtol=1e9))
    (flag,) = [f for f in result.findings if f.rule == "GS608"]
    assert flag.severity is Severity.WARNING and "blew up" not in flag.message
    assert not math.isnan(result.training[1].fall or 0.0)
