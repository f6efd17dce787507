"""`gradscope watch` ends a hung torchrun run where a rank stops answering, and names
the ranks (slow: one launch, through `--nproc-per-node`, which also carries rank 0's exit
code out of torchrun). A deadlock in the script's own collectives (rank 1 issues an
all_reduce rank 0 never issues) is the watchdog's to end, not torchrun's: it is one of
test_dist_stop.py's shared runs.
"""

from __future__ import annotations

import os
import sys
import time

import pytest
import torchrun_launch
from hang_lines import SCRIPT, assert_no_rank_traceback, gradscope_lines, line_of

pytestmark = pytest.mark.slow
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TIMEOUT_S = 2
ANSWER_WAIT_S = 1
"""How long rank 0 waits for a rank that never answers ($GRADSCOPE_HANG_ANSWER_WAIT)."""
BOUND_S = 60.0
"""Launch (15-22 s here), three steps, the timeout and the answer wait: far below gloo's 30 min."""


def launch(cmd: list[str], **kw) -> tuple[object, float]:
    start = time.monotonic()
    proc = torchrun_launch.run(cmd, timeout=180, cwd=ROOT, **kw)
    return proc, time.monotonic() - start


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
