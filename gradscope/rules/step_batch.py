"""GS430: the batch per optimizer step against the critical batch size the gradient noise
scale estimates (steps/noise.py). Information, never a warning: B_simple is an order-of-
magnitude estimate, and a batch off it trades steps for samples, it breaks nothing.
No torch."""

from __future__ import annotations

from gradscope.config import Thresholds
from gradscope.findings import Finding, Rule, Severity, Threshold
from gradscope.fmt import num
from gradscope.rules.registry import DECLARED, Stage, rule
from gradscope.rules.step_common import about
from gradscope.steps import noise
from gradscope.steps.records import WatchRun


@rule(
    "GS430",
    "batch-vs-noise-scale",
    Severity.INFO,
    "batch-size",
    Stage.WATCH,
    "watch: the batch per optimizer step is an order of magnitude above or below the "
    "critical batch size the gradient noise scale (B_simple) estimates",
    example="accumulating 64 micro-batches per step where B_simple is a few micro-batches",
    fix="move the batch toward B_simple (fewer micro-batches or ranks above it, more below) "
    "and retune the learning rate; or take it as information: a batch above B_simple buys "
    "fewer steps with more samples, one below it the reverse",
    thresholds=(
        Threshold(
            "noise-scale-factor",
            10,
            "info: the run's batch this many times above or below the critical batch size "
            "(B_simple), beyond two standard errors of the estimate",
        ),
    ),
    objectives=(
        "any one loss whose micro-batches are independent samples of it (accumulation or "
        "DDP ranks): B_simple needs them; a GAN's two losses, backward calls from "
        "different lines, or calls whose losses read the same target tensor (a backward at "
        "every time step of one batch of sequences) are not measured"
    ),
)
def batch_vs_noise(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """With gradient accumulation or DDP ranks, watch measures each micro-batch's gradient
    norm beside the step's, and from the two batch sizes the unbiased |G|² and tr(Σ) of
    McCandlish et al. 2018 (An Empirical Model of Large-Batch Training, appendix A.1), each
    smoothed over steps; their ratio B_simple estimates the critical batch size. It fires
    when the batch per step (micro-batch x micro-batches x ranks) is noise-scale-factor
    times above or below B_simple over the last 100 measured steps, beyond two standard
    errors. Caveats from the paper: B_simple assumes a well-conditioned Hessian and can
    differ from the true critical batch (B_noise) by several times; it grows as the loss
    falls, so early steps understate it; it is for plain SGD and carries over to Adam only
    approximately; and the micro-batches must be independent samples of one loss (a GAN's
    two losses are not, and are not measured)."""
    out = []
    for s in noise.summaries(run.steps, max(1, len(run.optimizers)), run.batch_read):
        if s.critical is None or s.batch is None or s.critical <= 0 or not s.resolved:
            continue
        low = max(s.critical - 2 * (s.spread or 0.0), 0.0)
        high = s.critical + 2 * (s.spread or 0.0)
        above = low > 0 and s.batch >= t.noise_scale_factor * high
        below = s.batch * t.noise_scale_factor <= low
        if not (above or below):
            continue
        r = s.batch / s.critical
        who = run.optimizer_label(s.optimizer) if len(run.optimizers) > 1 else "the batch"
        evidence = (
            s.line(),
            f"B_simple = tr(Σ)/|G|² from {s.steps} steps of {s.micro_batches} micro-batch "
            f"gradients each (McCandlish et al. 2018, appendix A.1)",
            f"in the paper's model a batch {num(r)}× the critical batch needs {num(1 + r)}× "
            f"the fewest samples and {num(1 + 1 / r)}× the fewest steps",
        )
        message, advice = _said(s.batch, s.unit, s.critical, r, above)
        bound = s.critical * (t.noise_scale_factor if above else 1 / t.noise_scale_factor)
        finding = this.finding(
            who, message, advice, value=s.batch, threshold=bound, evidence=evidence
        )
        out.append(about(finding, [s.first_step, s.last_step]))
    return out


def _said(batch: float, unit: str, critical: float, r: float, above: bool) -> tuple[str, str]:
    """(the message, the advice) for a batch above or below the critical batch size."""
    if above:
        return (
            f"the batch of {num(batch)} {unit} is {num(r)}× the critical batch size "
            f"≈ {num(critical)}: most of each step's samples average away noise that "
            "was already small",
            "fewer micro-batches (or ranks) per step reach the same loss with far fewer "
            "samples, in a few more steps; retune the learning rate with the batch",
        )
    return (
        f"the batch of {num(batch)} {unit} is 1/{num(1 / r)} of the critical batch "
        f"size ≈ {num(critical)}: each step follows noise, and a larger batch would "
        "take far fewer steps for about the same samples",
        "more micro-batches or ranks per step (with the learning rate raised to "
        "match) would finish in fewer steps; the paper's caveats apply (docs/rules.md)",
    )
