"""The parity of a host's callback with `gradscope watch`: one script per host, run as
the CLI runs it (`api.watch_script`) and again with the host's callback (`--host`, the
callback kept in the script's HOSTED); the same rule ids, every step series within
1e-6 relative."""

from __future__ import annotations

import math
import runpy
import sys
from pathlib import Path
from typing import Any

import pytest
from parity_bugs import RAISES, STEPS

from gradscope import api

HERE = Path(__file__).parent
REL = 1e-6
UNTIMED = ("time_s",)
"""What a run may differ in: the wall clock."""


def fresh() -> None:
    """What a new process starts with: accelerate's state, a singleton that refuses
    another mixed precision, reset."""
    if "accelerate" in sys.modules:
        from accelerate.state import AcceleratorState

        AcceleratorState._reset_state(True)


def watched(script: str, bug: str) -> Any:
    """`gradscope watch SCRIPT -- BUG`, in-process."""
    fresh()
    return api.watch_script(str(HERE / script), [bug])


def hosted(script: str, bug: str) -> Any:
    """`python SCRIPT BUG --host` (as the runner runs a script: __main__, its folder
    first on sys.path): the host callback's report. Read back and judged live at every
    read-back (no 50 ms floor, no time budget): the most a callback does mid-run."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("gradscope.watcher.recorder.MIN_FLUSH_INTERVAL_S", 0.0)
        patch.setattr("gradscope.integrations.live.BUDGET", 1.0)
        return _run_hosted(script, bug)


def _run_hosted(script: str, bug: str) -> Any:
    fresh()
    path = str(HERE / script)
    old_argv, old_path = sys.argv, list(sys.path)
    sys.argv = [path, bug, "--host"]
    sys.path.insert(0, str(HERE))
    try:
        host = runpy.run_path(path, run_name="__main__")["HOSTED"]
    finally:
        sys.argv, sys.path[:] = old_argv, old_path
    if hasattr(host, "watch"):  # a host's callback: it judged as the run went
        assert host.watch.live.judgements >= 2, (script, host.watch.live.judgements)
    return host.report


def rules(report: Any) -> list[tuple[str, str]]:
    """Every finding's rule id and severity (info too), sorted; ignored ones left out."""
    return sorted((f.rule, str(f.severity)) for f in report.findings if not f.ignored_by)


def close(a: Any, b: Any) -> bool:
    """Equal, numbers within REL (NaN equal to NaN, an infinity to itself), recursively."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=REL, abs_tol=0.0) if math.isfinite(a) else a == b
    return a == b


def step_differences(watch: Any, host: Any) -> list[str]:
    """Each step's field that differs (all of StepRecord but the clock), as lines."""
    out = []
    a, b = list(watch.run.steps), list(host.run.steps)
    if len(a) != len(b):
        out.append(f"{len(a)} steps under watch, {len(b)} through the host")
    for x, y in zip(a, b, strict=False):
        for name, value in vars(x).items():
            if name not in UNTIMED and not close(value, getattr(y, name)):
                out.append(f"step {x.step} {name}: watch {value!r}, host {getattr(y, name)!r}")
    return out


def tensors(report: Any) -> list[str]:
    return list(report.run.names())


def both(script: str, bug: str) -> tuple[Any, Any]:
    """One bug's run under `gradscope watch`, then through the host; torch's process-wide
    settings the scripts make (deterministic algorithms, one thread) undone after, as a
    process of their own would leave the test's (a later test in this worker compared
    passes with and without deterministic mode, and found none)."""
    import torch

    kept = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.get_num_threads(),
    )
    try:
        return watched(script, bug), hosted(script, bug)
    finally:
        torch.use_deterministic_algorithms(kept[0], warn_only=kept[1])
        torch.set_num_threads(kept[2])


def assert_parity(bug: str, watch: Any, host: Any) -> None:
    """The same rule ids (the bug's own among them), tensors and step series."""
    assert (watch.run.status, host.run.status) == ("completed", "completed"), bug
    assert rules(host) == rules(watch), (bug, rules(watch), rules(host))
    found = {rule for rule, _ in rules(host)}
    assert found == set() if bug == "healthy" else RAISES[bug] <= found, (bug, found)
    assert tensors(host) == tensors(watch), bug
    scaled = {s.scale is not None for s in watch.run.steps}
    assert scaled == {bug == "amp-skips"}, (bug, "a GradScaler where none was meant, or none")
    assert len(watch.run.steps) == STEPS, (bug, len(watch.run.steps))
    diffs = step_differences(watch, host)
    assert not diffs, (bug, diffs[:10])
