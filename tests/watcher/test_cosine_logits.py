"""Cosine similarities under cross_entropy with no temperature (an InfoNCE loss,
MultipleNegativesRankingLoss(model, scale=1) where it calls cross_entropy): the logits differ by
2 at most, so the loss stays above ln(1 + (C-1)/e²) and its gradients shrink; the run only
looked slow. GS431 names it from the loss's graph. A scale of 20, a temperature of 0.05 and
CLIP's learned logit_scale stay silent."""

from __future__ import annotations

import math

import pytest

from tests.watcher.watch_scripts import domain_watched


def _gs431(mode: str) -> list:
    watched = domain_watched("ranking_scale.py", mode)
    assert not watched.faults, watched.internal_error()
    return [f for f in watched.findings if f.rule == "GS431"]


def test_cosine_logits_with_no_temperature_are_named_with_their_floor():
    (found,) = _gs431("one")
    assert "cosine similarities" in found.message and "no temperature" in found.message
    assert found.value == pytest.approx(math.log1p(15 * math.exp(-2.0)))
    assert "scale=20.0" in found.advice


@pytest.mark.parametrize("mode", ["scale", "temperature", "learned"])
def test_a_scale_or_a_temperature_is_silent(mode):
    assert _gs431(mode) == []
