"""GS469: a loss term the script weights by 0 at every step its kind was read, so it trains
nothing: a consistency or unlabelled-data weight whose ramp-up never rises, a confidence
mask that no sample passes. Read from the
loss's graph (`run.loss_kinds`: a factor of 0 at the first steps is replaced by a later
step's, rules above watcher/loss_graph.py's union). No torch."""

from __future__ import annotations

from gradscope.config import Thresholds
from gradscope.findings import Finding, Rule, Severity
from gradscope.rules.registry import DECLARED, Stage, rule
from gradscope.rules.step_common import about, by_optimizer
from gradscope.rules.switched_on import READ_AGAIN_AFTER
from gradscope.steps.meaning import LossTerm
from gradscope.steps.records import WatchRun


@rule(
    "GS469",
    "term-weight-zero",
    Severity.INFO,
    "none-grad",
    Stage.WATCH,
    "watch: a loss term is multiplied by 0 at every step its kind was read, from the first "
    "steps to the last read: it adds nothing to the gradient",
    example="Mean Teacher's `loss = class_loss + w * consistency` with `w = 100 * "
    "sigmoid_rampup(0, 150)` (the step never passed): the consistency term stays × 0",
    fix="compute the weight from the current step or epoch (a ramp-up that reaches its "
    "maximum); drop the term if the run is meant to go without it",
    objectives=(
        "a weighted sum of losses read from its graph, each weight a Python number or a CPU "
        "tensor (a per-sample mask counts as 0 only when all of it is 0): a weight on a device "
        "is not read (no sync), and one that rises from 0 after the first steps is a ramp-up, "
        "not this"
    ),
)
def term_weight_zero(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """A term of the loss's graph (a cross-entropy, an MSE, ...) entered it multiplied by 0 at
    every step its kind was read: the first steps, and again every 100 steps in a run long
    enough to be read again. Its gradient is 0, so the data it reads (unlabelled batches, a
    teacher's targets) train nothing; the classic causes are a ramp-up weight computed from a
    step that never advances, and a per-sample confidence mask (on the CPU, where reading it
    costs no device sync) that no sample passed. Information, not a warning:
    an ablation that sets the weight to 0 on purpose looks the same, and only costs the
    term's forward. A weight that rises after the first steps is a ramp-up (not this)."""
    out = []
    for s in by_optimizer(run):
        kind = run.loss_kind(s.index)
        if kind is None or not s.steps or s.steps[-1].step <= READ_AGAIN_AFTER:
            continue
        zeros = [u for u in kind.terms if u.factor == 0]
        zero = [f"{u.kind.replace('_', '-')} ({u.reduction})" for u in zeros]
        if not zero:
            continue
        names = ", ".join(zero)
        finding = this.finding(
            s.subject("loss"),
            s.say(
                f"the loss's term {names} was multiplied by 0 at every step its kind was read "
                f"(the first steps, then every {READ_AGAIN_AFTER}; the run ended at step "
                f"{s.steps[-1].step}): it added nothing to the gradient there, so unless its "
                "weight rose after the last read, what it reads trained nothing"
            ),
            _advice(zeros),
            value=0.0,
            evidence=(f"loss read from its graph: {kind.describe()}",),
        )
        out.append(about(finding, ()))
    return out


def _advice(zeros: list[LossTerm]) -> str:
    """A KL weighted by 0 leaves a (C)VAE's latent unregularised: no ramp-up or mask there."""
    if all(u.kind == "gaussian_kl" for u in zeros):
        return (
            "give the KL its weight (ACT uses 10, a VAE 1, a β-VAE its β; an annealed weight "
            "rises from 0 with the step): weighted by 0 the encoder's latent is not pulled "
            "toward the prior, so the prior's samples (z = 0 at inference in ACT) are latents "
            "the decoder never saw"
        )
    return (
        "if the term should train (a consistency or unlabelled-loss weight), compute its "
        "weight from the current step or epoch so its ramp-up reaches the maximum, and "
        "give a confidence mask a threshold the predictions can pass (a probability "
        "threshold in (0, 1), compared with >=); if the run is meant to go without it, "
        "drop the term and save its forward"
    )
