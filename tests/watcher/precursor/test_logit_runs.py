"""GS453 on real runs of a char-level GPT with its attention in the open (logit_gpt.py: 2
layers, d=64, AdamW after 100 steps of warm-up, 600 steps), each watched with the CPU's
kernels pinned (pinned.py: the same trajectory on machines of one image): at lr 0.15 without
a norm on q and k the attention logits grow from ~5 to thousands, the softmax saturates
and the loss climbs back toward the uniform guess (ln 27) from step 392 (seed 1: 266; 2:
428; 3 layers: 461): named at step 128 (the others: 144), the module and its trajectory;
the gradient spikes of the collapse point back to it with a lead of 50 steps or more, and
the verdict that the run diverged (GS415) with the lead to the loss's own blow-up, 200
steps or more in the median (264, 122, 284 and 317; on a Debian 12 image seed 0 climbs
from about step 300 and leads by 179, so the median is the corpus's test, not one seed's).
The same runs at lr 0.015 (no
qk-layernorm either) and at lr 0.15 with qk-layernorm stay silent for 600 steps (`make
test` has seed 0's first 200, in its own process with the machine's kernels; the corpus
all 600, pinned): the rule reads the logits, not the
architecture. A climb into the warm-up's end is named 7 steps
before the blow-up it ends in; a blow-up at the warm-up's end with no logit grown before
it is missed (an expected failure)."""

from __future__ import annotations

import functools
import math
import statistics
from pathlib import Path

import pytest

from gradscope.findings import Severity
from gradscope.rules.step_attention import LEVEL
from gradscope.watcher import watch_script
from tests.watcher.precursor.pinned import watch_pinned

pytestmark = pytest.mark.slow

SCRIPT = str(Path(__file__).with_name("logit_gpt.py"))
PRECURSORS = {"GS451", "GS452", "GS453", "GS454"}


DIVERGING = [("attn", "0"), ("attn-deep", "0"), ("attn", "2"), ("attn", "1")]
"""The runs that diverge after their logits grew, by mode and seed (seed 3 of `attn` and of
`attn-deep` hold their loss for 600 steps; seeds 2 and 1 of
`attn-deep` blow up at the warm-up's end, at steps 103 and 99, warned 7 steps before and
missed: test_a_climb_into_the_warm_ups_end_is_warned_before_the_blow_up, the expected
failure after it, and docs/watch.md)."""

FIRST = ["h.1.attn", "h.1.attn", "h.1.attn", "h.1.attn"]
"""The module whose logits grew first, in each."""


@functools.cache
def _run(mode: str, seed: str = "0", steps: str = "600", pinned: bool = True):
    """The run watched with the CPU's kernels pinned (its trajectory the same on every
    machine of one image), or in this process with its own kernels (`pinned` False: a
    healthy control's silence does not hang on the last bit, at about half the time)."""
    argv = [mode, steps, seed]
    report = watch_pinned(SCRIPT, argv) if pinned else watch_script(SCRIPT, argv)
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


def _seeded(*values: str, seed: str):
    """A case of the run of `seed`: seed 0 of the 2-layer runs in every `make test`, the
    others (and the 3-layer run, a minute of pinned kernels) in the corpus."""
    every = seed == "0" and "attn-deep" not in values
    return pytest.param(*values, marks=() if every else pytest.mark.corpus)


@pytest.mark.parametrize(
    ("mode", "seed", "module"),
    [_seeded(*run, m, seed=run[1]) for run, m in zip(DIVERGING, FIRST, strict=True)],
)
def test_attention_logit_growth_is_named_before_the_run_diverges(mode, seed, module):
    report = _run(mode, seed)
    losses = [(r.step, r.loss) for r in report.run.steps if r.loss is not None]
    healthy = statistics.median(v for s, v in losses if 150 <= s < 250)
    assert statistics.median(v for _, v in losses[-50:]) > 1.25 * healthy  # really diverged
    (f,) = [f for f in report.findings if f.rule == "GS453"]
    assert f.severity == Severity.WARNING and f.subject == module
    assert f"attention logits in `{module}` grew" in f.message and "qk-layernorm" in f.advice
    spikes = [g for g in report.findings if g.rule == "GS403"]
    assert spikes and spikes[0].explained_by == f"GS453:{module}" and spikes[0].lead >= 50
    (verdict,) = [g for g in report.findings if g.rule == "GS415"]
    assert verdict.explained_by == f"GS453:{module}" and verdict.lead >= 50
    broke = f.steps[0] + verdict.lead  # the loss's own blow-up: high from there on
    assert statistics.fmean(v for s, v in losses if s >= broke) > 1.25 * healthy
    before = statistics.fmean(v for s, v in losses if f.steps[0] <= s < broke - 32)
    assert before < 1.15 * healthy  # warned while the loss still held its level


@pytest.mark.corpus
def test_a_climb_into_the_warm_ups_end_is_warned_before_the_blow_up():
    """attn-deep, seed 2: `h.2.attn`'s largest logit climbs from 3.7 at step 16 to 130 at
    96 as the warm-up reaches lr 0.15 at step 100; the loss goes from 2.4 to 4.2 at 103 and
    stays near 2.9-3.3. With no 128 steps of history yet, the trend is judged from the first
    sample: named at 96, 7 steps before (the lead the issue asks for, 50, is not met)."""
    report = _run("attn-deep", "2")
    losses = [(r.step, r.loss) for r in report.run.steps if r.loss is not None]
    assert statistics.fmean(v for s, v in losses if 120 <= s < 600) > 1.25 * 2.3  # diverged
    (f,) = [f for f in report.findings if f.rule == "GS453"]
    assert f.subject == "h.2.attn" and f.steps == (96,) and diverged_at(losses) == 103
    (verdict,) = [g for g in report.findings if g.rule == "GS415"]
    assert verdict.explained_by == "GS453:h.2.attn"


@pytest.mark.corpus
@pytest.mark.xfail(strict=True, reason="a blow-up at the peak lr: no logit grew before it")
def test_a_blow_up_at_the_warm_ups_end_is_warned_before():
    """attn-deep, seed 1: the loss holds at 2.23-2.25 over steps 94-98 and goes 2.67, 2.57,
    2.82, 3.6 over 99-102, for good; the attention logits grow after it (`h.0.attn` named
    at 144), as the warm-up reaches its peak: no logit grew before it (docs/watch.md: no
    signal measured precedes it)."""
    report = _run("attn-deep", "1")
    losses = [(r.step, r.loss) for r in report.run.steps if r.loss is not None]
    assert statistics.fmean(v for s, v in losses if 120 <= s < 600) > 1.25 * 2.3  # diverged
    (f,) = [f for f in report.findings if f.rule == "GS453"]
    assert f.steps[0] < 99


@pytest.mark.corpus
def test_the_median_lead_to_the_divergence_is_200_steps_or_more():
    leads = [g.lead for args in DIVERGING for g in _run(*args).findings if g.rule == "GS415"]
    assert len(leads) == len(DIVERGING) and min(leads) >= 50
    assert statistics.median(leads) >= 200


@pytest.mark.parametrize(
    ("mode", "seed", "steps"),  # the diverging runs' seeds
    [
        *(
            pytest.param(mode, seed, "600", marks=pytest.mark.corpus)
            for seed in ("0", "2", "3")
            for mode in ("attn-low", "attn-qknorm")
        ),
        # every `make test`: seed 0's first 200 steps (the lr is constant after the
        # warm-up: the 600-step run's prefix), past the step `attn` is warned at (128),
        # with this machine's own kernels
        *((mode, "0", "200") for mode in ("attn-low", "attn-qknorm")),
    ],
)
def test_a_lower_lr_or_qk_layernorm_stays_silent(mode, seed, steps):
    report = _run(mode, seed, steps, pinned=steps == "600")
    assert not PRECURSORS & {f.rule for f in report.findings}
    losses = [r.loss for r in report.run.steps if r.loss is not None]
    assert statistics.median(losses[-50:]) < 2.4  # healthy: it learned and held it
    attention = report.run.state_facts.attention
    assert {s.module for s in attention} == {"h.0.attn", "h.1.attn"}  # judged on its logits
    assert max(max(s.maxima) for s in attention) < LEVEL
    if mode == "attn-low":
        assert [f.rule for f in report.findings if f.severity >= Severity.WARNING] == []
