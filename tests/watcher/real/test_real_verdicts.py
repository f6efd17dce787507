"""Verdicts of watch on real training code: stock (tiny) configs give no warning, and each
seeded bug is named by the right rule, with the right parameter, optimizer and step.

The bugs are injected from outside the vendored code (arguments, or drivers/inject.py's
monkeypatches); see README.md for the table.
"""

from __future__ import annotations

import re

import pytest

from gradscope.findings import Severity

from . import runs
from .drivers import inject

pytestmark = pytest.mark.slow


def by_rule(report) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in report.findings:
        out.setdefault(f.rule, []).append(f)
    return out


def serious(report) -> list:
    return [f for f in report.findings if f.severity >= Severity.WARNING]


def text(f) -> str:
    return " ".join([f.subject, f.message, f.advice, *f.evidence])


def lines(findings) -> list[str]:
    return [f"{f.rule} {f.severity} {f.subject}: {f.message}" for f in findings]


# -- healthy stock configs ---------------------------------------------------------------------
HEALTHY = [
    "nanogpt",
    "nanogpt-accum",  # gradient accumulation is no missing zero_grad
    "nanogpt-amp",  # float16 loss scaling with torch.amp.GradScaler("cpu")
    "mingpt",
    "dcgan",
    "word-lm",
    "word-lm-adamw",
    "sine-lbfgs",
    "vae",
    "mnist",
]


@pytest.mark.parametrize("name", HEALTHY)
def test_healthy_stock_run_gives_no_warning(name):
    report = runs.watched(name)
    assert report.run.status == "completed", report.run.error
    assert report.run.steps, "no step seen: a verdict of nothing"
    assert serious(report) == [], lines(serious(report))


# -- nanoGPT -----------------------------------------------------------------------------------
def test_learning_rate_100x_is_called_out():
    """--learning_rate=0.1 (stock 1e-3): the loss rises while warm-up ramps the rate, then
    stalls far above the healthy run's."""
    found = serious(runs.watched("nanogpt-lr100"))
    assert found, "no warning on a 100x learning rate"
    assert any("learning rate" in text(f) for f in found), lines(found)


def test_missing_zero_grad_nanogpt():
    (f,) = by_rule(runs.watched("nanogpt-no-zero-grad"))["GS412"]
    assert f.severity == Severity.ERROR and "zero_grad" in f.message


def test_parameter_left_out_of_the_optimizer_is_named():
    found = by_rule(runs.watched("nanogpt-drop-param"))
    assert [f.subject for f in found["GS411"]] == [inject.DROPPED]


def test_layer_frozen_midway_names_the_layer_and_the_step():
    """transformer.h.0 frozen after step 40: from step 41 on, no gradient and no update."""
    report = runs.watched("nanogpt-freeze-midway")
    found = [f for f in serious(report) if f.subject.startswith("transformer.h.0")]
    assert found, lines(report.findings)
    step = inject.FREEZE_AFTER
    named = re.compile(rf"\bstep {step}\b|\bstep {step + 1}\b")
    assert any(named.search(text(f)) for f in found), lines(found)


def test_detach_in_the_forward_names_the_cut_parameters():
    found = by_rule(runs.watched("nanogpt-detach"))
    cut = {
        "transformer.h.1.ln_2.weight",
        "transformer.h.1.mlp.c_fc.weight",
        "transformer.h.1.mlp.c_proj.weight",
    }
    assert {f.subject for f in found["GS413"]} == cut
    report = runs.watched("nanogpt-detach")
    assert {f.rule for f in serious(report)} == {"GS413"}, lines(report.findings)


def test_nanogpt_trained_on_its_own_input_is_named_target_in_input():
    report = runs.watched("nanogpt-unshifted")
    assert [f.rule for f in serious(report)] == ["GS445"], lines(report.findings)
    (found,) = by_rule(report)["GS445"]
    assert "nn.Embedding (30×32)" in found.message and "1, 2, 3, 25, 26" in found.message


def test_nanogpt_without_its_causal_mask_is_named_future_attended():
    report = runs.watched("nanogpt-unmasked")
    assert [f.rule for f in serious(report)] == ["GS471"], lines(report.findings)
    (found,) = by_rule(report)["GS471"]
    assert found.subject == "transformer.h.0.attn" and found.steps == (1, 2)
    assert "`transformer.h.1.attn`" in found.evidence[-1]


def test_a_transformer_lm_run_without_its_mask_is_named_and_with_it_is_not():
    """pytorch/examples' word-language Transformer (sequence-first batches): an
    nn.TransformerEncoder as a decoder, its causal mask left out."""
    assert serious(runs.watched("word-lm-transformer")) == []
    report = runs.watched("word-lm-unmasked")
    assert [f.rule for f in serious(report)] == ["GS471"], lines(report.findings)
    (found,) = by_rule(report)["GS471"]
    assert found.subject == "encoder.layers.0.self_attn" and found.value > 0.4


def test_log_of_zero_names_the_step():
    report = runs.watched("nanogpt-log0")
    (f,) = by_rule(report)["GS401"]
    assert f.value == inject.LOG0_STEP and f"step {inject.LOG0_STEP}" in f.message
    assert len(report.run.steps) == 41


def test_amp_records_are_unscaled():
    """Under loss scaling watch records the loss and norms the float32 run has (step 1:
    same weights and batch, before any update)."""
    plain = runs.watched("nanogpt").run.steps[0]
    amp = runs.watched("nanogpt-amp").run.steps[0]
    assert amp.scale is not None and amp.scale > 1
    assert amp.loss == pytest.approx(plain.loss, rel=1e-5)
    assert amp.grad_norm == pytest.approx(plain.grad_norm, rel=1e-4)


def test_clip_before_unscale_is_named():
    """The script's scaler.unscale_ is lost: clip_grad_norm_(1.0) clips gradients still
    multiplied by the loss scale (65536), every update shrinks ~65536x."""
    report = runs.watched("nanogpt-clip-scaled")
    first = report.run.steps[0]
    assert first.scaled_clip
    assert first.grad_norm == pytest.approx(
        runs.watched("nanogpt").run.steps[0].grad_norm, rel=1e-4
    )
    found = [f for f in serious(report) if "unscale_" in text(f)]
    assert found, lines(report.findings)


# -- minGPT ------------------------------------------------------------------------------------
def test_missing_zero_grad_mingpt():
    (f,) = by_rule(runs.watched("mingpt-no-zero-grad"))["GS412"]
    assert f.severity == Severity.ERROR


# -- dcgan: two optimizers ---------------------------------------------------------------------
def test_missing_zero_grad_names_the_discriminators_optimizer():
    """netD.zero_grad() forgotten, netG.zero_grad() kept: only D's optimizer carries
    gradients over (optimizer 0, Adam over Discriminator.*)."""
    (f,) = by_rule(runs.watched("dcgan-no-zero-grad-d"))["GS412"]
    assert "Discriminator" in text(f) and "Generator" not in text(f), text(f)


# -- word_language_model: hand-written update --------------------------------------------------
def test_gradient_ascent_by_hand_is_called_out():
    """--lr=-20: the hand-written `p.data.add_(p.grad, alpha=-lr)` climbs the loss
    (3.7 → 280 over 42 steps)."""
    report = runs.watched("word-lm-ascent")
    assert len(report.run.steps) == len(runs.plain("word-lm-ascent"))
    assert serious(report), lines(report.findings)


def test_parameter_skipped_by_the_hand_written_update_is_named():
    report = runs.watched("word-lm-skip-param")
    assert len(report.run.steps) == len(runs.plain("word-lm-skip-param"))
    found = [f for f in serious(report) if f.subject == inject.SKIPPED]
    assert found, lines(report.findings)
    assert {f.subject for f in serious(report)} == {inject.SKIPPED}, lines(serious(report))
