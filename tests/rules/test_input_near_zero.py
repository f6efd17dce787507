"""GS105 on a weight whose own layer's bias gets a gradient: the signal reached the layer,
and the weight's gradient is small because the layer's input is near zero (a capsule
network's decoder reading squashed vectors that start near 0): information. A weight whose
bias's gradient vanished with it, or that has no bias to tell, is still a warning."""

from __future__ import annotations

from fabricated import param, stats

from gradscope import rules
from gradscope.findings import Severity


def _vanishing(*params) -> dict[str, Severity]:
    return {f.subject: f.severity for f in rules.diagnose(stats(*params)) if f.rule == "GS105"}


def test_a_decoder_fed_near_zero_capsules_is_information():
    found = _vanishing(
        param("decoder.0.weight", 3e-8, shape=(64, 32), depth=1),
        param("decoder.0.bias", 1.3e-4, shape=(64,), depth=1),
        param("decoder.2.weight", 1.5e-4, shape=(256, 64), depth=2),
    )
    assert found == {"decoder.0.weight": Severity.INFO}


def test_a_conv_weight_whose_bias_gets_a_gradient_is_information():
    found = _vanishing(
        param("enc.conv.weight", 5e-8, shape=(8, 4, 3, 3), depth=1),
        param("enc.conv.bias", 1e-3, shape=(8,), depth=1),
    )
    assert found == {"enc.conv.weight": Severity.INFO}


def test_a_weight_whose_bias_vanished_too_is_still_a_warning():
    found = _vanishing(
        param("0.weight", 3e-8, shape=(16, 16), depth=0),
        param("0.bias", 2e-8, shape=(16,), depth=0),
        param("9.weight", 0.2, shape=(16, 16), depth=9),
    )
    assert found.get("0.weight") == Severity.WARNING


def test_a_weight_without_a_bias_or_with_a_non_finite_one_is_still_a_warning():
    alone = _vanishing(param("proj.weight", 3e-8, shape=(16, 16)))
    assert alone == {"proj.weight": Severity.WARNING}
    broken = _vanishing(
        param("proj.weight", 3e-8, shape=(16, 16)),
        param("proj.bias", 1e-3, finite=False),
    )
    assert broken.get("proj.weight") == Severity.WARNING
