"""DLRM's embedding tables (nn.EmbeddingBag(sparse=True)) stepped by SparseAdam beside the
MLPs' Adam: a healthy run has nothing to report; the tables left out of every optimizer
are GS411 with the advice of a table (SparseAdam for sparse gradients), not that of a
target, EMA or fixed network, which a lookup by index never is."""

from __future__ import annotations

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched


def test_sparse_tables_beside_dense_optimizer_are_healthy():
    report = domain_watched("sparse_tables.py", "healthy")
    loud = [f for f in report.findings if f.severity >= Severity.WARNING]
    assert not loud, [(f.rule, f.message) for f in loud]


def test_tables_left_out_get_the_table_advice():
    report = domain_watched("sparse_tables.py", "missing")
    outside = [f for f in report.findings if f.rule == "GS411"]
    assert {f.subject for f in outside} == {f"emb_l.{k}.weight" for k in range(3)}
    for f in outside:
        assert f.severity is Severity.ERROR
        assert "embedding table" in f.advice and "SparseAdam" in f.advice, f.advice
        assert "teacher" not in f.advice, f.advice
