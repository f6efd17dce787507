"""`watch` on a diffusion model: a DDPM on 2-D points (paradigm_scripts/own/ddpm.py, the
loop of the small public ones), healthy with the plain noise MSE and with min-SNR weighting
over a cosine schedule; its bugs named, cause first, at the right step: a time embedding
detached after its projection, and a cosine schedule left unclipped (alphas_cumprod reaches
0, the min-SNR weight is 0/0). One watch per run, shared by its assertions."""

from __future__ import annotations

import os

import pytest

from gradscope.findings import Severity

pytestmark = pytest.mark.slow

DDPM = os.path.join(os.path.dirname(__file__), "paradigm_scripts", "own", "ddpm.py")
CONFIGS = {
    "healthy": ["--steps", "200"],
    "min-snr": ["--steps", "200", "--min-snr"],
    "detach-time": ["--steps", "200", "--detach-time"],
    "no-beta-clip": ["--no-beta-clip"],
}
STEPS = {"no-beta-clip": 12}


@pytest.fixture(scope="module")
def runs():
    from gradscope.watcher import watch_script

    cache: dict = {}

    def watched(name: str):
        if name not in cache:
            cache[name] = watch_script(DDPM, CONFIGS[name], steps=STEPS.get(name))
        return cache[name]

    return watched


@pytest.mark.parametrize("name", ["healthy", "min-snr"])
def test_a_healthy_diffusion_run_gets_no_warning(runs, name):
    report = runs(name)
    assert report.run.status == "completed"
    assert [(f.rule, f.message) for f in report.findings if f.severity >= Severity.WARNING] == []


def test_a_detached_time_embedding_is_named_on_its_projection(runs):
    report = runs("detach-time")
    loud = [f for f in report.findings if f.severity >= Severity.WARNING]
    assert {f.subject for f in loud} == {"time.0.weight", "time.0.bias"}
    for f in loud:
        assert f.rule == "GS413" and "got no gradient (None) in all 200 steps" in f.message
        assert "gradscope inspect --script" in f.advice
    assert report.findings[0].rule == "GS413"


def test_a_schedule_whose_alphas_cumprod_reaches_zero_is_named_at_its_first_step(runs):
    """The first batch that samples the last timestep makes the loss NaN (step 2 here); the
    advice's command names the op (the weight's division: checked by hand, it says `div`
    at the min-SNR line)."""
    report = runs("no-beta-clip")
    first = report.findings[0]
    assert first.rule == "GS401" and first.severity == Severity.ERROR
    losses = [(r.step, r.loss) for r in report.run.steps]
    nan_at = next(step for step, loss in losses if loss != loss)
    assert first.steps[0] == nan_at == 2
    assert "the loss became non-finite" in first.message
    assert f"--step {nan_at} -- --no-beta-clip" in first.advice
    assert not [f for f in report.findings[1:] if f.severity >= Severity.ERROR]
