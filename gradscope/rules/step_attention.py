"""Attention logits that grow until the softmax saturates (GS453), a precursor. No torch.

Without a norm on q and k, a high learning rate grows the query and key weights together,
and the largest pre-softmax logit q·kᵀ/√d grows with their product: for hundreds to
thousands of steps before the attention collapses onto one key per row, its gradient
vanishes and the loss diverges (Wortsman et al. 2023; Dehghani et al. 2023, ViT-22B;
Kimi K2 caps it at 100). watcher/logit_probe.py samples it every 16th step, per module.
"""

from __future__ import annotations

from gradscope.config import Thresholds
from gradscope.findings import RULES, Finding, Severity
from gradscope.fmt import num
from gradscope.rules.registry import Stage, When, rule
from gradscope.rules.step_common import about
from gradscope.rules.step_growth import EARLY_BACK, steady_rise
from gradscope.rules.symptoms import DIVERGENCE
from gradscope.steps.logit_facts import AttentionSeries
from gradscope.steps.records import WatchRun

LEVEL = 100.0
"""The largest logit at least this: a softmax with a gap of 100 between two keys gives the
second e⁻¹⁰⁰ of the first (MuonClip, Kimi K2, caps the logits here)."""
GROWTH = 10.0
"""At least this many times its early level (the median of its first three samples)."""
DOUBLING = 2.0
"""At least this many times its value SPAN steps before: still growing."""
SPAN = 128
"""Steps the growth is judged over (8 samples): attention logits grow by orders of
magnitude in a few hundred steps, a trend this long is no spike."""


@rule(
    "GS453",
    "attention-logit-growth",
    Severity.WARNING,
    "precursor",
    Stage.WATCH,
    "watch (precursor): the largest pre-softmax attention logit of a module grew steadily, "
    "10× its early level and past 100, doubling within 128 steps: its softmax saturates "
    "and the run diverges next",
    example="a 2-layer char-level GPT at lr 0.15 without qk-layernorm (the corpus's "
    "logit_gpt.py attn): attention logits in `h.1.attn` grew 28× in 112 steps (step 16: "
    "5.03, step 128: 143; max 2.50e+05 by step 592); the loss climbed back toward ln 27 "
    "from step 392",
    fix="qk-layernorm (a LayerNorm on q and k per head), or a lower peak learning rate "
    "(or a longer warm-up)",
    objectives="any: the attention's own scores, a mechanism in the forward whatever the loss "
    "means",
    explains=DIVERGENCE,
    explains_when=When.BEFORE,
)
def attention_logit_growth(run: WatchRun, t: Thresholds) -> list[Finding]:
    """Per attention module (scaled_dot_product_attention, or a softmax over 4-d q @ kᵀ
    scores), the largest |q·kᵀ|·scale of its first batch element at every 16th step. It
    warns at the first sample at which that logit is past 100, 10× the median of its
    first three samples, at least twice what it was 128 steps before, and rose at 60% of
    the samples in between or at each of the last three (a climb after a warm-up's bump
    and dip): a trend, not a spike nor a level that a trained model holds. Before 128
    steps of history (a climb into a warm-up's end that blows up there), the same trend is
    judged from the first sample: past 100, 10× it, twice its value 32 steps before. The
    module whose logits grew first is named (of several at one sample, the one whose
    logit is highest); the others are in the evidence. A run with
    qk-layernorm is judged the same way, by its logits."""
    grown = []
    for series in run.state_facts.attention:
        at = steady_rise(series.steps, series.maxima, LEVEL, GROWTH, DOUBLING, SPAN)
        if at is not None:
            grown.append((series.steps[at], at, series))
    if not grown:
        return []
    grown.sort(key=lambda g: (g[0], -g[2].maxima[g[1]]))  # first; at one step, the highest
    step, at, first = grown[0]
    return [_finding(step, at, first, [g[2].module for g in grown[1:]])]


def _finding(step: int, at: int, s: AttentionSeries, others: list[str]) -> Finding:
    start, now, top = s.maxima[0], s.maxima[at], max(s.maxima)
    steps = step - s.steps[0]
    factor = now / start if start > 0 else float("inf")
    evidence = [
        "largest attention logit by step: "
        + ", ".join(f"{n}: {num(v)}" for n, v in _trajectory(s, at)),
        f"first certain at step {step} (at least {LEVEL:g}, {GROWTH:g}× its "
        + (
            f"early level, {DOUBLING:g}× its value {SPAN}"
            if steps >= SPAN
            else f"first sample, {DOUBLING:g}× its value {EARLY_BACK}"
        )
        + " steps before, rising)",
    ]
    if others:
        evidence.append("grew too: " + ", ".join(f"`{m}`" for m in others))
    finding = RULES["GS453"].finding(
        s.module,
        f"attention logits in `{s.module}` grew {factor:.0f}× in {steps} steps "
        f"(step {s.steps[0]}: {num(start)}, step {step}: {num(now)}; max {num(top)} by step "
        f"{s.steps[-1]}): its softmax saturates onto one key per row, its gradient vanishes, "
        "and the loss diverges next (precursor)",
        "add qk-layernorm (a LayerNorm on q and k per head before the dot product), or lower "
        "the peak learning rate (or lengthen the warm-up)",
        value=now,
        threshold=LEVEL,
        evidence=tuple(evidence),
    )
    return about(finding, [step])


def _trajectory(s: AttentionSeries, at: int) -> list[tuple[int, float]]:
    """Up to six samples from the first to the last, the warning's among them."""
    n = len(s.steps)
    picks = sorted({0, n // 4, n // 2, at, (3 * n) // 4, n - 1})
    return [(s.steps[i], s.maxima[i]) for i in picks]
