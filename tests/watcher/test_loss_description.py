"""A loss summed over the time steps of an unrolled sequence (a cross-entropy per step of
truncated BPTT) was described term by term: 35 copies of the same text in every finding
that names the loss. A run of equal terms is told once with its count; different terms,
and a negated one, keep their order and sign."""

from __future__ import annotations

from gradscope.steps.meaning import LossKind, LossTerm

CE = LossTerm("cross_entropy", "mean", 0.125, classes=4)
MSE = LossTerm("mse", "mean", 1.0)
MINUS = LossTerm("mse", "mean", -2.0)


def test_a_run_of_equal_terms_is_told_once_with_its_count():
    text = LossKind((CE,) * 8 + (MSE,), unknown_terms=1).describe()
    assert text == (
        "8 × (cross-entropy over 4 classes (mean) × 0.125) + mse (mean) + 1 term(s) not recognised"
    )


def test_different_and_negated_terms_keep_their_order_and_sign():
    assert (
        LossKind((CE, MSE)).describe() == "cross-entropy over 4 classes (mean) × 0.125 + mse (mean)"
    )
    assert LossKind((MINUS, CE, MINUS, MINUS)).describe() == (
        "-mse (mean) × 2 + cross-entropy over 4 classes (mean) × 0.125 - 2 × (mse (mean) × 2)"
    )
