"""What the hang tests read in a hung run's stderr: gradscope's lines, a line of
scripts/hang_train.py as the hang block quotes it, and that no rank printed a traceback."""

from __future__ import annotations

import os

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts", "hang_train.py")


def line_of(text: str) -> str:
    """`hang_train.py:N: text` for the line of the script holding `text`."""
    with open(SCRIPT, encoding="utf-8") as f:
        lines = [ln.strip() for ln in f]
    n = next(i for i, ln in enumerate(lines, 1) if text in ln)
    return f"hang_train.py:{n}: {lines[n - 1]}"


def gradscope_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("gradscope:")]


def assert_no_rank_traceback(stderr: str) -> None:
    """torchrun's agent prints its own ChildFailedError; no rank may print a traceback."""
    assert "[rank0]:" not in stderr and "[rank1]:" not in stderr, stderr[-3000:]
    frames = [ln.strip() for ln in stderr.splitlines() if ln.strip().startswith('File "')]
    launcher = [f for f in frames if "torch/distributed/" in f or "<frozen runpy>" in f]
    assert frames == launcher, stderr[-3000:]
