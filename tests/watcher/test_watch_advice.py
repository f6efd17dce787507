"""Advice gives a command line that works: watch knows the script's own arguments."""

from __future__ import annotations

import math
from dataclasses import replace

from watch_scripts import step_record

from gradscope.config import Settings
from gradscope.rules.watch import judge
from gradscope.steps.records import ParamInfo, WatchRun

W = ParamInfo("w", (4, 4), True, True, 0.1)


def _gs401(run: WatchRun) -> str:
    (f,) = [f for f in judge(run, Settings()) if f.rule == "GS401"]
    return f.advice


def _blown_at_40() -> WatchRun:
    recs = [step_record(s, 1.0, 1.0, param_norms=(1.0,)) for s in range(1, 60)]
    recs[39] = step_record(40, 1.0, math.inf, param_norms=(math.inf,))
    return WatchRun("script my train.py", (W,), tuple(recs), "completed", 1.0, optimizers=("SGD",))


def test_gs401_advice_is_the_command_line_that_works():
    run = replace(_blown_at_40(), argv=("--lr", "0.1", "--name", "a b"))
    advice = _gs401(run)
    assert "`gradscope inspect --script 'my train.py' --step 40 -- --lr 0.1 --name 'a b'`" in advice
    assert "ARGS" not in advice
    advice = _gs401(replace(run, argv=()))  # a script run without arguments
    assert "`gradscope inspect --script 'my train.py' --step 40`" in advice
    assert "ARGS" in _gs401(_blown_at_40())  # the Python API: arguments unknown
