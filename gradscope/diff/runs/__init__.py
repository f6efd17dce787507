"""`gradscope diff a.jsonl b.jsonl`: two training runs (`watch --log` files) step by step.

`diff_logs(a, b)` reads both logs and feeds the second, one step at a time, to a
`RunsComparer` (engine.py) built on the first; `watch --against` feeds the live run's
steps to the same class (live.py). No torch here.

Those live in compare.py, imported on first use: gradscope/__init__.py loads findings.py
(the GS607-GS609 declarations) on every command, `--help` included.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gradscope.diff.runs.compare import RunsOptions, comparer, conclude, diff_logs, is_log

__all__ = ["RunsOptions", "comparer", "conclude", "diff_logs", "is_log"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from gradscope.diff.runs import compare

        return getattr(compare, name)
    raise AttributeError(f"module 'gradscope.diff.runs' has no attribute {name!r}")
