"""GS477: a distance loss whose target is attached and is the prediction's own input: a
decoder that reconstructs features its encoder computes, with the encoder's forward attached
(DINOSAUR's frozen-encoder target left in the graph and in the optimizer). The loss pulls the
target toward the prediction as well, and both can settle at a constant, where it is 0: the
representation collapses while the loss looks like progress. Read from the loss's graph
(`run.loss_kinds`, watcher/upstream_targets.py). No torch."""

from __future__ import annotations

from gradscope.config import Thresholds
from gradscope.findings import Finding, Rule, Severity
from gradscope.rules.registry import DECLARED, Stage, rule
from gradscope.rules.step_common import about, by_optimizer
from gradscope.steps.records import WatchRun


@rule(
    "GS477",
    "target-from-own-input",
    Severity.WARNING,
    "teacher-trained",
    Stage.WATCH,
    "watch: an MSE-like loss's target is attached to the graph and the prediction is computed "
    "from it: the loss moves the target toward the prediction too, with no stop-gradient",
    example="DINOSAUR's `feats = encoder(img)` without torch.no_grad(), then "
    "`mse_loss(decoder(slots(feats)), feats)` with the encoder in the optimizer",
    fix="compute the target under torch.no_grad() (or .detach() it) and leave a frozen "
    "encoder out of the optimizer (requires_grad_(False))",
    objectives=(
        "mse_loss, smooth_l1_loss and huber_loss, read from their graph: a target computed by "
        "the graph whose node lies below the prediction's (not data, not a leaf); two views' "
        "embeddings (VICReg's invariance term) or two slices of one batched output are not it"
    ),
)
def upstream_target(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """At the steps whose loss kind was read, a distance term (MSE, smooth L1, Huber) had a
    target that requires grad, made by the graph, and the prediction was computed from that
    very tensor: a reconstruction of the model's own features. Its gradient reaches the
    target's side as well, pulling the features toward whatever the decoder predicts; a
    constant representation makes the loss 0, so the encoder and decoder can collapse there
    together. The reference objectives stop the gradient at the target (a frozen encoder's
    features under no_grad, an EMA teacher's output); a run with it stopped stays silent."""
    out = []
    for s in by_optimizer(run):
        kind = run.loss_kind(s.index)
        terms = [u for u in kind.terms if u.upstream_target] if kind is not None else []
        if kind is None or not terms or not s.steps:
            continue
        names = ", ".join(sorted({u.kind.replace("_", "-") for u in terms}))
        finding = this.finding(
            s.subject("loss"),
            s.say(
                f"the loss's {names} term is given a target that requires grad, and its "
                "prediction is computed from that same tensor: its gradient also pulls the "
                "target toward the prediction (no stop-gradient), so the model that makes "
                "the target is trained to match its own reconstruction, and a constant "
                "output makes the loss 0 (collapse)"
            ),
            "compute the target under torch.no_grad() (or .detach() it) and leave a frozen "
            "encoder out of the optimizer (requires_grad_(False))",
            evidence=(f"loss read from its graph: {kind.describe()}",),
        )
        out.append(about(finding, [r.step for r in s.steps[:1]]))
    return out
