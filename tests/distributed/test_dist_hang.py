"""`gradscope watch` ends a hung torchrun run and names the ranks (slow: two launches).

One launch per way to hang: a deadlock in the script's own collectives (rank 1 issues an
all_reduce rank 0 never issues), and a rank that stops answering (through
`--nproc-per-node`, which also carries rank 0's exit code out of torchrun).
"""

from __future__ import annotations

import os
import sys
import time

import pytest
import torchrun_launch

pytestmark = pytest.mark.slow
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts", "hang_train.py")
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
TIMEOUT_S = 2
ANSWER_WAIT_S = 1
"""How long rank 0 waits for a rank that never answers ($GRADSCOPE_HANG_ANSWER_WAIT)."""
BOUND_S = 60.0
"""Launch (15-22 s here), three steps, the timeout and the answer wait: far below gloo's 30 min."""


def line_of(text: str) -> str:
    """`hang_train.py:N: text` for the line of the script holding `text`."""
    with open(SCRIPT, encoding="utf-8") as f:
        lines = [ln.strip() for ln in f]
    n = next(i for i, ln in enumerate(lines, 1) if text in ln)
    return f"hang_train.py:{n}: {lines[n - 1]}"


def launch(cmd: list[str], **kw) -> tuple[object, float]:
    start = time.monotonic()
    proc = torchrun_launch.run(cmd, timeout=180, cwd=ROOT, **kw)
    return proc, time.monotonic() - start


def gradscope_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("gradscope:")]


def assert_no_rank_traceback(stderr: str) -> None:
    """torchrun's agent prints its own ChildFailedError; no rank may print a traceback."""
    assert "[rank0]:" not in stderr and "[rank1]:" not in stderr, stderr[-3000:]
    frames = [ln.strip() for ln in stderr.splitlines() if ln.strip().startswith('File "')]
    launcher = [f for f in frames if "torch/distributed/" in f or "<frozen runpy>" in f]
    assert frames == launcher, stderr[-3000:]


def test_a_collective_only_one_rank_issues_stops_the_run_naming_both_ranks():
    proc, wall = launch(
        [
            *TORCHRUN,
            "-m",
            "gradscope",
            "watch",
            SCRIPT,
            "--hang-timeout",
            str(TIMEOUT_S),
            "--",
            "--bug",
            "extra-collective",
        ]
    )
    print(f"wall {wall:.1f} s")
    err = proc.stderr
    assert proc.returncode != 0 and wall < BOUND_S, (wall, err[-3000:])
    lines = gradscope_lines(err)
    assert lines[0] == f"gradscope: the run is stuck: no rank made progress for {TIMEOUT_S} s"
    assert err.count("the run is stuck") == 1  # one block, from rank 0
    forward = line_of("mse_loss(model(x), y)")
    collective = line_of("dist.all_reduce(torch.ones(1))")
    rank0 = next(ln for ln in lines if "  rank 0: " in ln)
    rank1 = next(ln for ln in lines if "  rank 1: " in ln)
    assert "rank 0: 3 optimizer steps, waiting in DistributedDataParallel.forward at " in rank0
    assert rank0.endswith(forward), rank0
    assert "rank 1: 3 optimizer steps, waiting in all_reduce at " in rank1
    assert rank1.endswith(collective), rank1
    assert any("different places" in ln for ln in lines)
    assert lines[-1] == "gradscope: stopping every rank (exit 2); set the limit with --hang-timeout"
    assert "done, loss" not in err  # the script never finished
    assert_no_rank_traceback(err)


def test_a_rank_that_stops_answering_is_named_and_the_exit_code_is_2():
    proc, wall = launch(
        [
            sys.executable,
            "-m",
            "gradscope",
            "watch",
            SCRIPT,
            "--nproc-per-node",
            "2",
            "--hang-timeout",
            str(TIMEOUT_S),
            "--",
            "--bug",
            "dead-rank",
        ],
        env={**os.environ, "GRADSCOPE_HANG_ANSWER_WAIT": str(ANSWER_WAIT_S)},
    )
    print(f"wall {wall:.1f} s")
    err = proc.stderr
    assert proc.returncode == 2 and wall < BOUND_S, (proc.returncode, wall, err[-3000:])
    lines = gradscope_lines(err)
    assert lines[0] == f"gradscope: the run is stuck: no rank made progress for {TIMEOUT_S} s"
    rank0 = next(ln for ln in lines if "  rank 0: " in ln)
    assert "rank 0: 3 optimizer steps, waiting in DistributedDataParallel.forward at " in rank0
    assert rank0.endswith(line_of("mse_loss(model(x), y)")), rank0
    assert "gradscope:   rank 1: no answer: it died or is stuck outside Python" in lines
    assert "gradscope: the other ranks wait for rank 1" in lines
    assert_no_rank_traceback(err)
