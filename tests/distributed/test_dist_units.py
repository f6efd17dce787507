"""Fast single-process tests of the distributed layer's pure logic."""

from __future__ import annotations

from gradscope.distributed import fingerprint, reduction, signals
from gradscope.distributed.merge import DistReport, RankRecord, merge_rows, render_text
from gradscope.findings import RULES


def test_compare_names_first_divergent_tensor_and_odd_rank():
    fields = [fingerprint.WEIGHT_FIELDS] * 2
    same = [[1.0, 2.0, 0.5, 0.5], [3.0, 4.0, 0.1, 0.1]]
    odd = [[1.0, 2.0, 0.5, 0.5], [3.001, 4.0, 0.1, 0.1]]
    div = fingerprint.compare(["a", "b"], ["parameter"] * 2, [same, same, odd], fields)
    assert div is not None and div.name == "b" and div.field == "weight sum"
    assert div.odd_ranks == (2,) and div.count == 1


def test_compare_healthy_and_nan_everywhere_is_no_divergence():
    rows = [[[float("nan"), 1.0]], [[float("nan"), 1.0]]]
    assert fingerprint.compare(["x"], ["buffer"], rows, [fingerprint.BUFFER_FIELDS]) is None


def test_sharded_tensors_are_not_compared():
    rows = [[[1.0, 1.0, 1.0, 1.0]], [[2.0, 2.0, 2.0, 2.0]]]
    assert fingerprint.compare(["w"], ["parameter"], rows, [()]) is None


def test_reduction_error_indices_map_to_names():
    msg = (
        "Expected to have finished reduction in the prior iteration before starting a new "
        "one. ...\nParameter indices which did not receive grad for rank 1: 2 3\n In addition"
    )
    err = reduction.parse(msg, ["a.weight", "a.bias", "aux.weight", "aux.bias"])
    assert err is not None and err.kind == "unused" and err.rank == 1
    assert err.names == ("aux.weight", "aux.bias")
    twice = reduction.parse(
        "Expected to mark a variable ready only once. ... Parameter at index 3 with name "
        "shared.bias has been marked as ready twice.",
        ["a", "b", "shared.weight", "shared.bias"],
    )
    assert twice is not None and twice.kind == "ready-twice" and twice.names == ("shared.bias",)
    assert reduction.parse("CUDA out of memory", ["a"]) is None


def test_advice_is_the_least_costly_fix():
    assert "find_unused_parameters" not in reduction.advice("unused", "never-ran", False)
    assert "find_unused_parameters=True" in reduction.advice("unused", "never-ran", True)
    assert "use_reentrant=False" in reduction.advice("ready-twice", None, False)
    already_on = reduction.advice("unused", "never-ran", True, finds_unused=True)
    assert "ranks train different models" in already_on and "pass find" not in already_on


def test_signals():
    assert signals.skipped_steps([5, 4, 5]) == (1,)
    assert signals.outlier_ranks([1.0, 1.2, 40.0]) == (2,)
    assert signals.outlier_ranks([1.0, float("nan")]) == (1,)
    assert signals.outlier_ranks([1.0, 1.5]) == ()
    assert signals.outlier_ranks([1.5, 3.9]) == ()  # the widest honest pair seen (batch 16)
    assert signals.outlier_ranks([1.53, 79.6]) == (1,)  # ddp_train.py --bug bad-shard
    assert signals.outlier_ranks([float("nan"), float("inf")]) == ()  # no one rank's fault
    assert signals.outlier_ranks([0.0, 0.0]) == ()


def test_outliers_and_usage_must_persist_over_sampled_steps():
    assert signals.persistent([0, 1], 1) == (1,)  # the only sampled step
    assert signals.persistent([0, 1], 5) == ()  # one hard batch among five
    assert signals.persistent([0, 2], 5) == (1,)
    assert signals.persistent([0, 0], 0) == ()


def test_observed_reports_usage_only_when_it_held_in_every_sampled_step():
    from gradscope.distributed.observed import Observed

    aux = RULES["GS501"].finding("aux.weight", "no gradient", "freeze it")
    seen = Observed()
    seen.count(2, [1.0, 1.1], [aux])
    seen.count(2, [1.0, 30.0], [aux])
    found = {(f.rule, f.subject): f for f in seen.findings()}
    assert found[("GS501", "aux.weight")].evidence[0] == "no gradient in 2 of 2 sampled step(s)"
    assert ("GS506", "rank 1") not in found  # an outlier once in two steps
    seen.count(2, [1.0, 1.2], [])  # got its gradient in a third step: the set varies
    seen.count(2, [1.0, 25.0], [])
    found = {(f.rule, f.subject): f for f in seen.findings()}
    assert ("GS501", "aux.weight") not in found
    assert "25" in found[("GS506", "rank 1")].message


def test_merge_shows_per_rank_columns_only_where_ranks_differ():
    records = (RankRecord(0, 6, 6, 0.8, 0.5), RankRecord(1, 6, 5, 1.2, 0.5))
    rows = {r.label: r for r in merge_rows(records)}
    assert rows["optimizer steps"].per_rank == (6, 5)
    assert rows["training forwards"].value == 6 and not rows["training forwards"].per_rank
    text = render_text(DistReport(2, "gloo", "DDP", records))
    assert "rank 1" in text and "no distributed findings" in text
    ranks = DistReport(2, "gloo", "DDP", records).summary()["ranks"]
    assert ranks == {
        "forwards": 6,
        "steps": [6, 5],
        "local_grad_norm": [0.8, 1.2],
        "grad_norm": 0.5,
    }
    assert DistReport(2, "gloo", "DDP", ()).summary()["ranks"] == {}


def test_rules_are_registered_with_a_row():
    for rid in ("GS501", "GS502", "GS503", "GS504", "GS505", "GS506", "GS507"):
        assert RULES[rid].source == "distributed"
