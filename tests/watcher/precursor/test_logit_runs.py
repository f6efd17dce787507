"""GS453 on real runs of a char-level GPT with its attention in the open (logit_gpt.py: 2
layers, d=64, AdamW after 100 steps of warm-up, 600 steps): at lr 0.15 without a norm on
q and k the attention logits grow from ~5 to thousands, the softmax saturates and the
loss goes back to the uniform guess (ln 27) by step ~535 (3 layers: ~375): named by step
180, the module and its trajectory, and the gradient spikes of the collapse point back to
it with a lead of 50 steps or more. The same run at lr 0.015 (no qk-layernorm either) and
at lr 0.15 with qk-layernorm stay silent: the rule reads the logits, not the
architecture."""

from __future__ import annotations

import functools
import math
import statistics
from pathlib import Path

import pytest

from gradscope.findings import Severity
from gradscope.rules.step_attention import LEVEL

pytestmark = pytest.mark.slow

SCRIPT = str(Path(__file__).with_name("logit_gpt.py"))
PRECURSORS = {"GS451", "GS452", "GS453", "GS454"}


@functools.cache
def _run(mode: str):
    from gradscope.watcher import watch_script

    report = watch_script(SCRIPT, [mode])
    assert report.run.status == "completed", report.run.error
    return report


def diverged_at(losses: list[tuple[int, float]]) -> int | None:
    """The first step from which the loss's next 16 steps average 1.3× or more the median
    of the 50 steps before it (or a non-finite loss)."""
    values = [v for _, v in losses]
    for i in range(50, len(values) - 16):
        if not math.isfinite(values[i]):
            return losses[i][0]
        if statistics.fmean(values[i : i + 16]) >= 1.3 * statistics.median(values[i - 50 : i]):
            return losses[i][0]
    return None


@pytest.mark.parametrize(("mode", "module"), [("attn", "h.1.attn"), ("attn-deep", "h.1.attn")])
def test_attention_logit_growth_is_named_before_the_run_diverges(mode, module):
    report = _run(mode)
    losses = [(r.step, r.loss) for r in report.run.steps if r.loss is not None]
    healthy = statistics.median(v for s, v in losses if 150 <= s < 250)
    assert statistics.median(v for _, v in losses[-50:]) > 1.3 * healthy  # really diverged
    broke = diverged_at(losses)
    (f,) = [f for f in report.findings if f.rule == "GS453"]
    assert f.severity == Severity.WARNING and f.subject == module
    assert f"attention logits in `{module}` grew" in f.message and "qk-layernorm" in f.advice
    assert broke is not None and broke - f.steps[0] >= 50
    spikes = [g for g in report.findings if g.rule == "GS403"]
    assert spikes and spikes[0].explained_by == f"GS453:{module}" and spikes[0].lead >= 50
    assert any(g.explained_by == f"GS453:{module}" for g in report.findings if g.rule == "GS415")


@pytest.mark.parametrize("mode", ["attn-low", "attn-qknorm"])
def test_a_lower_lr_or_qk_layernorm_stays_silent(mode):
    report = _run(mode)
    assert not PRECURSORS & {f.rule for f in report.findings}
    losses = [r.loss for r in report.run.steps if r.loss is not None]
    assert statistics.median(losses[-50:]) < 2.4  # healthy: it learned and held it
    attention = report.run.state_facts.attention
    assert {s.module for s in attention} == {"h.0.attn", "h.1.attn"}  # judged on its logits
    assert max(max(s.maxima) for s in attention) < LEVEL
    if mode == "attn-low":
        assert [f.rule for f in report.findings if f.severity >= Severity.WARNING] == []
