"""FSDP2 under torchrun (2 CPU ranks, gloo) through the host path: the norms the report
gives are the global ones, equal to an unsharded reference's; a plain `gradscope.watch()`
block's too (api.watch binds the distributed hooks under torchrun, as the CLI does).
Both runs share one launch (tests/distributed/shared_launch.py): a run whose ranks all
succeed needs nothing of torchrun's but its environment."""

from __future__ import annotations

import json
import math
import os
import sys

import pytest

pytest.importorskip("accelerate")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "distributed"))  # the shared launch

import shared_launch  # noqa: E402

pytestmark = pytest.mark.slow
SCRIPT = os.path.join(HERE, "scripts", "fsdp_host_train.py")
HOW = {"tracker": (), "block": ("block",)}


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    """Both runs in one launch: {how: (its result, its report, its reference)}."""
    tmp = tmp_path_factory.mktemp("fsdp_host")
    files = {how: (tmp / f"{how}-report.json", tmp / f"{how}-ref.json") for how in HOW}
    plan = {how: [SCRIPT, str(rep), str(ref), *HOW[how]] for how, (rep, ref) in files.items()}
    preload = (*shared_launch.WATCH_MODULES, "gradscope.integrations.accelerate")
    found, proc = shared_launch.launch(tmp, plan, scripts=frozenset(plan), preload=preload)
    return {how: (found[how], *files[how], proc) for how in HOW}


def test_fsdp2_norms_are_global(launched):
    _launched_norms_are_global(*launched["tracker"])


def test_fsdp2_norms_are_global_in_a_plain_watch_block(launched):
    _launched_norms_are_global(*launched["block"])


def _launched_norms_are_global(run, report, ref, launch) -> None:
    assert run is not None, launch.stderr[-3000:]
    assert run.returncode == 0, run.stderr[-3000:]
    doc, reference = json.loads(report.read_text()), json.loads(ref.read_text())
    names = [p["name"] for p in doc["params"]]
    assert len(doc["steps"]) == len(reference) == 6
    for step, want in zip(doc["steps"], reference, strict=True):
        assert math.isclose(step["grad_norm"], want["total"], rel_tol=1e-6)
        assert not math.isclose(step["grad_norm"], want["local"], rel_tol=1e-3)  # not a shard's
        for name, norm in zip(names, step["param_norms"], strict=True):
            assert math.isclose(norm, want["norms"][name], rel_tol=1e-6), (name, norm)
    assert [f for f in doc["findings"] if f["severity"] in ("error", "warning")] == []
