"""2-process gloo runs under torchrun (slow): each bug of the example loops found, by name."""

from __future__ import annotations

import json
import os
import re
import sys
import time

import pytest
import torchrun_launch

pytestmark = pytest.mark.slow
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DDP = os.path.join(ROOT, "gradscope", "examples", "ddp_train.py")
FSDP = os.path.join(ROOT, "gradscope", "examples", "fsdp_train.py")


def launch(tmp_path, script, *args, every=2):
    out = tmp_path / "report.json"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        "-m",
        "gradscope.distributed",
        script,
        "--every",
        str(every),
        "-o",
        str(out),
        "--",
        *args,
    ]
    start = time.perf_counter()
    proc = torchrun_launch.run(cmd, timeout=120, cwd=ROOT)
    doc = json.loads(out.read_text()) if out.exists() else None
    return proc, doc, time.perf_counter() - start


def rules(doc):
    return {(f["rule"], f["subject"]) for f in doc["findings"]}


def test_healthy_ddp_has_no_findings_and_one_collective_per_gathering(tmp_path):
    proc, doc, _ = launch(tmp_path, DDP, "--bug", "none")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert doc["findings"] == [] and doc["layout"] == "DDP"
    assert doc["collectives"] == doc["gatherings"] == 4
    assert isinstance(doc["ranks"]["local grad norm (pre all-reduce)"], list)  # ranks differ


def test_healthy_fsdp2_has_no_findings_and_right_norms(tmp_path):
    proc, doc, _ = launch(tmp_path, FSDP, "--check-norms")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert doc["findings"] == [] and doc["layout"] == "FSDP2"
    # two ranks share stderr, so their lines can interleave: find the records, not the lines
    records = re.findall(
        r"NORMS rank=\d max_rel_err=\S+ total_rel_err=\S+ clip_rel_err=\S+ naive_ratio=[\d.]+",
        proc.stderr,
    )
    assert len(records) == 8
    for record in records:
        fields = dict(kv.split("=") for kv in record.split()[1:])
        assert float(fields["max_rel_err"]) < 1e-6 and float(fields["clip_rel_err"]) < 1e-6
        assert float(fields["naive_ratio"]) < 0.95  # the local shard alone under-reports


def test_perturbed_rank_is_found_naming_the_parameter(tmp_path):
    proc, doc, _ = launch(tmp_path, DDP, "--bug", "perturb")
    assert proc.returncode == 1
    assert ("GS505", "block.weight") in rules(doc)


@pytest.mark.parametrize(
    ("bug", "subject", "words"),
    [
        ("unused", "aux.weight", "never ran"),
        ("dropped-output", "aux.weight", "not part of the loss"),
        ("rank-branch", "block.weight", "rank-dependent"),
        ("reentrant", "block.bias", "twice"),
    ],
)
def test_ddp_reduction_errors_are_named_and_explained(tmp_path, bug, subject, words):
    proc, doc, _ = launch(tmp_path, DDP, "--bug", bug)
    assert proc.returncode != 0
    if doc is None:  # rank 0 was the stuck one: rank 1 explains on stderr
        assert subject in proc.stderr and words in proc.stderr
        return
    found = {f["subject"]: f for f in doc["findings"]}
    assert subject in found and words in found[subject]["message"]
