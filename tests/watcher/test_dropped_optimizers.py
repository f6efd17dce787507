"""Optimizers the script drops (a task's inner SGD in a meta-learning loop, a federated
client's): their last step leaves an open reset, whose gradients no later backward
changes; each is measured once, not at every later backward (which made a run of N tasks
cost N² norms and keep one tensor per norm). The terminal shows a few and sums up the
rest (a line and a table each made hundreds)."""

from __future__ import annotations

import torch
from torch import nn

from gradscope.watcher import resets
from tests.watcher.test_discover_scans import _reptile


def test_a_dropped_optimizers_unchanged_gradients_are_measured_once(monkeypatch):
    measured: list[int] = []
    real = resets.norms

    def counted(grads):
        measured.append(len(grads))
        return real(grads)

    monkeypatch.setattr(resets, "norms", counted)
    torch.manual_seed(0)
    run = _reptile(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)), 12).run
    assert len(run.steps) == 12 * 3  # two inner steps a task, and the outer one
    assert len(measured) <= 2 * 12  # 22 here; at every later backward each: 154


def test_the_terminal_shows_six_optimizers_and_sums_up_the_rest():
    """An optimizer per task: SHOWN of them get a line and a table, the rest one line;
    the run's line counts the kinds (`SGD ×11`, not eleven names)."""
    from gradscope.report import watch_terminal
    from gradscope.report.console import View

    torch.manual_seed(0)
    report = _reptile(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)), 10)
    lines = watch_terminal.render(report, View(width=80)).splitlines()
    assert max(len(line) for line in lines) <= 80
    assert sum(line.startswith("  optimizer ") for line in lines) == watch_terminal.SHOWN
    assert "  and 5 more optimizers (SGD ×5, 2 steps each): --format json lists each" in lines
    assert sum("gradient norm over its" in line for line in lines) == watch_terminal.SHOWN
    assert "(SGD ×11)" in lines[1]


def test_an_optimizer_a_finding_names_is_shown_whatever_its_steps():
    """The six shown are those the findings name first (a subject such as `loss
    (optimizer 9 (SGD, ...))`), then the busiest."""
    from dataclasses import replace

    from gradscope.findings import RULES
    from gradscope.report import watch_terminal

    torch.manual_seed(0)
    report = _reptile(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)), 10)
    named = RULES["GS431"].finding("loss (optimizer 9 (SGD, Sequential10))", "fed", "fix")
    shown = watch_terminal._shown(replace(report, findings=[named]))
    assert 9 in shown and len(shown) == watch_terminal.SHOWN
