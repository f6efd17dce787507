"""Two runs compared: the options, the comparer built on the reference's log, and
`diff_logs`, which reads both logs and feeds the second to it one step at a time. No torch.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from gradscope.diff.align import EMPTY_MAP, NameMap
from gradscope.diff.runs import findings, log
from gradscope.diff.runs.engine import RunsComparer
from gradscope.diff.runs.result import RunsDiff
from gradscope.diff.runs.tolerance import choose


@dataclass(frozen=True)
class RunsOptions:
    rtol: float | None = None
    atol: float | None = None
    exact: bool = False
    dtype: str | None = None
    """The dtype both runs trained in, when their logs do not record it."""
    names: NameMap = EMPTY_MAP


def is_log(path: str) -> bool:
    """A `watch --log` file by its name: .jsonl or .jsonl.gz."""
    return path.lower().endswith((".jsonl", ".jsonl.gz"))


def comparer(ref: log.RunLog, options: RunsOptions, new_dtype: str | None = None) -> RunsComparer:
    tol = choose(ref.dtype, new_dtype, options.dtype, options.rtol, options.atol, options.exact)
    return RunsComparer(ref, tol, options.names)


def conclude(c: RunsComparer, new_label: str, notes: list[str]) -> RunsDiff:
    result = c.finish(new_label, notes)
    if result.could_not_run is None:
        result.findings = findings.of(result)
    return result


def diff_logs(ref_path: str, new_path: str, options: RunsOptions | None = None) -> RunsDiff:
    options = options or RunsOptions()
    started = time.perf_counter()
    ref, new = log.read(ref_path), log.read(new_path)
    c = comparer(ref, options, new.dtype)
    steps = sorted(
        (s for ss in new.steps.values() for s in ss), key=lambda s: (s.step, s.optimizer)
    )
    for step in steps:
        c.feed(step, new.names)
    result = conclude(c, new_path, ref.notes + new.notes)
    result.duration_s = time.perf_counter() - started
    return result
