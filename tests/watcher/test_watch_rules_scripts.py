"""The time-series verdicts on real tiny training scripts run under watch: healthy ones
(noisy loss, eval steps interleaved, a late plateau) stay silent; a learning rate 100× too
high, a layer frozen midway, a GAN's optimizer without zero_grad, clipping before
unscale_ are named."""

from __future__ import annotations

import pytest
from watch_scripts import watched

from gradscope.findings import Severity


def by_rule(report) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in report.findings:
        out.setdefault(f.rule, []).append(f)
    return out


@pytest.mark.parametrize(
    ("script", "argv"),
    [
        ("rule_noisy.py", ()),  # batches of 8: the loss moves 20-30% step to step
        ("rule_eval.py", ()),  # model.eval() + no_grad forward every 10 steps, dropout
        ("rule_plateau.py", ()),  # learned in ~80 steps, flat on label noise for 300
        ("rule_tiny_lm.py", ()),  # a tiny transformer at a sane lr, larger first norms
    ],
)
def test_healthy_scripts_give_no_finding(script, argv):
    report = watched(script, *argv)
    assert report.run.status == "completed"
    assert report.findings == [], [f.message for f in report.findings]


@pytest.mark.parametrize("argv", [("0.3",), ("0.3", "--clip")])
def test_learning_rate_100x_too_high_blows_up_and_never_recovers(argv):
    found = by_rule(watched("rule_tiny_lm.py", *argv))
    (f,) = found["GS414"]
    assert f.severity == Severity.ERROR and "never recovered" in f.message
    assert f.evidence[0].startswith("loss at steps 1-")
    # the cause leads: the blow-up points to lr-too-high, which names the learning rate
    (cause,) = found["GS419"]
    assert f.explained_by == f"GS419:{cause.subject}"
    assert "lr up to 0.3" in cause.message and "lower the learning rate" in cause.advice


@pytest.mark.parametrize("argv", [(), ("--zeros",)])
def test_layer_frozen_midway_stopped_learning_at_that_step(argv):
    found = by_rule(watched("rule_freeze.py", *argv))
    assert sorted(f.subject for f in found["GS417"]) == ["0.bias", "0.weight"]
    assert all("stopped learning at step 120" in f.message for f in found["GS417"])
    assert all(f.severity == Severity.WARNING for f in found["GS417"])
    assert set(found) == {"GS417"}  # not "dead ReLUs" (GS405), not only an info GS410


def test_gan_findings_name_the_optimizer():
    found = by_rule(watched("rule_gan.py", "--d-no-zero-grad"))
    assert any(f.message.startswith("optimizer 0 (Adam, ") for f in found["GS412"])
    assert all(f.message.startswith("optimizer ") for fs in found.values() for f in fs)


def test_healthy_gan_gives_no_finding():
    report = watched("rule_gan.py")
    assert report.findings == [], [f.message for f in report.findings]


def test_clip_before_unscale_is_named_and_nothing_else_is_advised():
    report = watched("rule_amp_clip.py")
    assert all(r.scaled_clip for r in report.run.steps if not r.skipped)
    found = by_rule(report)
    (f,) = found["GS416"]
    assert f.severity == Severity.ERROR and "scaler.unscale_(optimizer)" in f.advice
    assert "GS406" not in found and "GS403" not in found
    assert "GS416" not in by_rule(watched("rule_amp_clip.py", "--unscale"))
