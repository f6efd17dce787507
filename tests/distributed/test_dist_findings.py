"""The distributed rules (gradscope/distributed/findings.py) from what the ranks sent, without
torchrun: two ranks' payloads packed as a gathering packs them (distributed/payload.py),
judged by the session's verdicts; DDP's reduction error read by explain()."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from gradscope.distributed.observed import Observed
from gradscope.distributed.payload import Gathered, ParamColumn, pack
from gradscope.distributed.session import Session

NAMES = ["twice.weight", "branch.weight", "unused.weight", "w"]


def _session() -> Session:
    """A session that found a DDP model with four parameters and no buffers, without the
    hooks a real one installs."""
    s = Session.__new__(Session)
    s.t = SimpleNamespace(
        names=NAMES, params=[None] * len(NAMES), sharded=[False] * len(NAMES), buffers=[]
    )
    s.t.buffer_names = []
    s.model = SimpleNamespace(static_graph=False, find_unused_parameters=True)
    s.tracker = SimpleNamespace(unused=lambda: [])
    s.evidence = Observed()
    s.rank = None
    s.forwards = 0
    return s


def _rank(steps: int, arrivals: list[int], local_sq: float, weight_sum: float) -> torch.Tensor:
    per = torch.zeros(len(NAMES), len(ParamColumn), dtype=torch.float64)
    per[:, ParamColumn.WEIGHT_SUM] = 1.0
    per[-1, ParamColumn.WEIGHT_SUM] = weight_sum
    per[:, ParamColumn.ARRIVALS] = torch.tensor(arrivals, dtype=torch.float64)
    per[0, ParamColumn.LOCAL_SQ] = local_sq
    return pack(7, steps, per, torch.zeros(0, 2))


def test_a_gathering_names_each_distributed_rule_that_two_ranks_show():
    s = _session()
    rows = torch.stack(
        [
            _rank(3, [2, 1, 0, 1], local_sq=1.0, weight_sum=1.0),
            _rank(2, [2, 0, 0, 1], local_sq=1e4, weight_sum=1.5),  # skipped a step, an outlier
        ]
    )
    gathered = Gathered.cut(rows, len(NAMES), 0)
    assert gathered.steps.tolist() == [3.0, 2.0] and gathered.forwards.tolist() == [7.0, 7.0]
    found = {(f.rule, f.subject) for f in s.verdicts(gathered) + s.evidence.findings()}
    assert found == {
        ("GS503", "twice.weight"),  # its gradient arrived twice in one backward
        ("GS502", "branch.weight"),  # used on rank 0 only
        ("GS501", "unused.weight"),  # on no rank
        ("GS505", "w"),  # rank 1's weights differ
        ("GS506", "rank 1"),  # its local gradient norm stands out
        ("GS507", "rank 1"),  # one optimizer step fewer
    }


def test_ddps_ready_twice_error_is_named_by_its_parameter():
    message = (
        "Expected to mark a variable ready only once. ... Parameter at index 0 with name "
        "twice.weight has been marked as ready twice."
    )
    (f,) = _session().explain(RuntimeError(message))
    assert (f.rule, f.subject) == ("GS504", "twice.weight")
    assert f.message.startswith("marked ready twice")
