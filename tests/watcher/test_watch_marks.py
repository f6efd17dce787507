"""The views mark the steps the findings name (Finding.steps): the same spike steps the
spike rule computes, the non-finite steps, every optimizer's, and no mark without a
finding. The watcher's views read no rule."""

from __future__ import annotations

import math
import pathlib

import pytest
from test_watch_rules_series import gan, gan_run, healthy, nanogpt_high_lr, rec, run_of
from watch_scripts import watched

from gradscope.config import Settings
from gradscope.report.watch_marks import marks
from gradscope.rules import watch as rules
from gradscope.rules.steps import spike_steps
from gradscope.watcher.report import WatchReport

T = Settings().thresholds


def judge(run, settings):
    return WatchReport.of(run, rules.judge(run, settings), settings)


def spiky():
    records = healthy(300)
    records[149] = rec(150, records[149].loss, 25.0)  # a norm spike
    records[219] = rec(220, 40.0, records[219].grad_norm)  # a loss spike
    return run_of(records)


def nan_late():
    records = healthy(120)
    records[99] = rec(100, math.nan, math.nan)
    records[100] = rec(101, 2.0, math.inf)
    return run_of(records)


RUNS = {
    "spiky": spiky,
    "gan": lambda: gan_run(gan(g_spike=300)),
    "blow-up": lambda: run_of(nanogpt_high_lr()),
    "nan": nan_late,
}


def _rows(report) -> dict[str, tuple[int, ...]]:
    return {m.label.split()[0]: m.steps for m in marks(report)}


@pytest.mark.parametrize("name", RUNS)
def test_spike_marks_are_the_spike_rules_steps(name):
    run = RUNS[name]()
    report = judge(run, Settings())
    rows = _rows(report)
    for rule, kind in (("GS403", "norm"), ("GS402", "loss")):
        expected = (
            tuple(spike_steps(run, T, kind)) if rule in {f.rule for f in report.findings} else ()
        )
        assert rows.get(rule, ()) == expected
    if name in ("spiky", "gan"):
        assert rows["GS403"]  # the fixture's spike is marked


def test_non_finite_marks_every_non_finite_step():
    rows = _rows(judge(nan_late(), Settings()))
    assert rows["GS401"] == (100, 101)


def test_a_real_spike_is_marked_at_its_batch():
    rows = _rows(watched("spike_batch.py"))
    assert rows["GS403"] == (150,) and rows["GS402"] == (150,)


def test_no_finding_no_mark():
    assert marks(judge(run_of(healthy(300)), Settings())) == []


def test_the_watcher_imports_no_rule_but_where_it_judges_the_run():
    root = pathlib.Path(__file__).parents[2] / "gradscope"
    importers = sorted(
        p.relative_to(root).as_posix()
        for p in [*(root / "watcher").glob("*.py"), *(root / "report").glob("watch_*.py")]
        if any(
            line.strip().startswith(("from gradscope.rules", "import gradscope.rules"))
            for line in p.read_text().splitlines()
        )
    )
    assert importers == ["watcher/session.py"]
