"""A loss fed probabilities where it wants logits (GS431), read off the loss's graph at the
first step: no threshold, nothing measured. No torch.

cross_entropy applies its own log_softmax, binary_cross_entropy_with_logits its own
sigmoid. A softmax (or sigmoid) before them squashes the model's output twice: the loss
cannot fall below a floor above 0 and its gradients shrink, so the run looks like one that
learns slowly, and a learning-rate finding would give the wrong fix. A softmax or
log_softmax over another axis than the loss's classes (the batch, the sequence) trains
the model on another question. The graph shows both directly (watcher/loss_inputs.py).
"""

from __future__ import annotations

from dataclasses import replace

from gradscope.config import Thresholds
from gradscope.findings import Finding, Rule, Severity
from gradscope.fmt import num
from gradscope.rules.registry import DECLARED, Stage, rule
from gradscope.rules.step_common import about, by_optimizer, loss_steps
from gradscope.steps.meaning import LossKind, LossTerm
from gradscope.steps.records import WatchRun

KL_FIX = (
    "take log_softmax where the softmax is: kl_div wants log-probabilities as its input "
    "(F.kl_div(F.log_softmax(s / T, -1), F.softmax(t / T, -1)), or log_softmax for both "
    "with log_target=True)"
)
LOG_TARGET_FIX = (
    "pass log-probabilities as the target with log_target=True (F.log_softmax(t / T, -1)), "
    "or probabilities (F.softmax(t / T, -1)) with log_target=False"
)
BCE_SOFTMAX_FIX = (
    "pass the raw logits to binary_cross_entropy_with_logits (drop the softmax before it); "
    "for one label per sample, use cross_entropy on the logits instead"
)
LOGIT_TARGETS_FIX = (
    "pass probabilities as cross_entropy's soft targets (F.softmax(teacher_logits / T, -1)), "
    "or class indices (targets.argmax(-1)) for hard labels"
)
"""kl_div's, the softmax-under-BCE and the soft targets' fixes, shared with inspect's GS432
(rules/logits.py)."""
LOG_SIGMOID_FIX = (
    "pass the raw logits to the loss (drop the sigmoid before it): F.logsigmoid, "
    "coral_loss and a pairwise -logsigmoid(s_i - s_j) take logits; for probabilities "
    "elsewhere, take torch.sigmoid of the logits separately"
)
SQUASHED_FIX = (
    "pass the raw logits to the loss that applies its own softmax or sigmoid (drop the "
    "model's), or keep the model's and turn the loss's off (DiceLoss(softmax=False) or "
    "sigmoid=False)"
)
COSINE_FIX = (
    "scale the cosine similarities before cross_entropy: divide by a temperature (0.05 to "
    "0.1) or multiply by a scale (sentence-transformers' default "
    "MultipleNegativesRankingLoss(model, scale=20.0), CLIP's learned logit_scale)"
)

_FIX = {
    "softmax": "pass the raw logits to cross_entropy (drop the softmax before it); for "
    "probabilities elsewhere, take softmax of the logits separately",
    "sigmoid": "pass the raw logits to binary_cross_entropy_with_logits (drop the sigmoid "
    "before it), or keep the sigmoid and use binary_cross_entropy (BCELoss)",
    "softmax-wrong-dim": "drop the softmax and pass the raw logits, classes on dim 1 "
    "(or the last dim, flattened to (N, C))",
    "log-softmax-wrong-dim": "take log_softmax over the classes (dim=-1 for (..., C) "
    "logits), or pass the raw logits to cross_entropy",
    "softmax-not-log": "take log_softmax of the logits where the softmax is (nll_loss and "
    "ctc_loss want log-probabilities), or pass the raw logits to cross_entropy in place of "
    "nll_loss",
    "softmax-as-logits": "hand the distribution (or log_softmax) the raw logits "
    "(Categorical(logits=z), log_softmax(z), the softmax dropped from the network), or its "
    "probabilities as probabilities (Categorical(probs=p), p.log())",
    "softmax-kl-input": KL_FIX,
    "probs-as-log-target": LOG_TARGET_FIX,
    "softmax-as-bce-logits": BCE_SOFTMAX_FIX,
    "logits-as-targets": LOGIT_TARGETS_FIX,
    "squashed-twice": SQUASHED_FIX,
    "cosine-unscaled": COSINE_FIX,
    "sigmoid-as-log-sigmoid-logits": LOG_SIGMOID_FIX,
    "rate-as-log-rate": "drop the positive link and pass the raw output (the log-rate, any "
    "real value) with log_input=True, or keep the link and pass log_input=False, which reads "
    "the input as the rate itself",
}
CTC_FIX = {
    "softmax-not-log": "take log_softmax of the logits over the classes where the softmax is: "
    "ctc_loss wants log-probabilities, (T, N, C) with the classes last",
    "log-softmax-wrong-dim": "take log_softmax over the classes, the last dim "
    "(F.log_softmax(logits, dim=-1), then .transpose(0, 1) for batch-first logits): ctc_loss "
    "wants (T, N, C) log-probabilities",
}
"""ctc_loss has no logits form: its fix is the log_softmax alone."""
WHAT = {
    "softmax": "probabilities where cross_entropy wants logits (a double softmax)",
    "sigmoid": "probabilities where binary_cross_entropy_with_logits wants logits (a double "
    "sigmoid)",
    "softmax-wrong-dim": "a softmax over the wrong axis where cross_entropy wants logits",
    "log-softmax-wrong-dim": "log-probabilities normalised over the wrong axis",
    "softmax-not-log": "probabilities where it wants log-probabilities (a softmax with no log)",
    "softmax-kl-input": "probabilities where kl_div wants log-probabilities",
    "logits-as-targets": "logits where cross_entropy wants probability targets",
    "softmax-as-bce-logits": "probabilities where binary_cross_entropy_with_logits wants "
    "logits (a softmax, then its own sigmoid)",
    "probs-as-log-target": "probabilities where kl_div(log_target=True) wants log-probabilities "
    "as its target",
    "rate-as-log-rate": "a rate where it wants a log-rate",
    "cosine-unscaled": "cosine similarities in [-1, 1] as logits, with no temperature",
    "softmax-as-logits": "probabilities where a distribution or log_softmax wants logits (a "
    "double softmax)",
    "squashed-twice": "probabilities where it wants logits (a double softmax or sigmoid)",
    "sigmoid-as-log-sigmoid-logits": "probabilities where log-sigmoid wants logits (a double "
    "sigmoid)",
}


@rule(
    "GS431",
    "probs-as-logits",
    Severity.ERROR,
    "logits",
    Stage.WATCH,
    "watch: the loss's graph shows a softmax under cross_entropy, a sigmoid or softmax under "
    "binary_cross_entropy_with_logits or a softmax with no log under nll_loss or ctc_loss, or "
    "a (log_)softmax over another axis than the classes, a Poisson NLL on a log-rate "
    "(log_input=True) that comes out of exp, softplus or relu, or a softmax's probabilities "
    "normalised again as logits (Categorical(logits=probs)) or taken by kl_div as "
    "log-probabilities, or soft targets with a negative entry (logits) under cross_entropy, "
    "or cosine similarities under cross_entropy with no temperature (a scale of 1)",
    example="`loss = F.cross_entropy(F.softmax(model(x), -1), y)` on a 10-class classifier: the "
    "loss can never fall below ln(1 + 9/e) = 1.46 and the run stalls there",
    fix="pass the raw logits to the loss (drop the softmax or sigmoid before it); a "
    "log_softmax over the classes before cross_entropy or nll_loss is right as it is",
    objectives=(
        "a cross-entropy or binary_cross_entropy_with_logits, read from the loss's graph: "
        "they want logits; nll_loss and ctc_loss want log-probabilities (a log_softmax over "
        "the classes, ctc_loss's last dim; the log of the user's own probabilities); BCELoss "
        "on a sigmoid is right; a Poisson NLL exp(x) - y·x wants a log-rate x of any sign, "
        "its rate form μ - y·log μ a rate; under any objective (a policy gradient too), "
        "probabilities normalised again as logits (Categorical(logits=probs)) or squashed "
        "again by a loss's own softmax or sigmoid (DiceLoss(softmax=True)); kl_div "
        "wants log-probabilities as its input, and as its target with log_target=True; other "
        "losses are not judged"
    ),
    explains=("GS405", "GS409", "GS414", "GS415", "GS419"),
)
def probabilities_as_logits(
    run: WatchRun, t: Thresholds, *, this: Rule = DECLARED
) -> list[Finding]:
    """The loss's autograd graph, read at the first step, shows cross_entropy's own
    LogSoftmaxBackward0 over a SoftmaxBackward0 (through views, transposes and casts), a Sigmoid- or
    SoftmaxBackward0 under binary_cross_entropy_with_logits, or a (log_)softmax whose dim is not the
    loss's class dim once followed through the views between them. The first two squash the output
    twice: the loss cannot fall below ln(1 + (C-1)/e) for C or ln(1 + 1/e) = 0.31, and its gradients
    shrink; the third normalises over the batch or the sequence. A SoftmaxBackward0 with no log
    under nll_loss or ctc_loss (CtcLossBackward0, its classes the last dim of its (T, N, C) input)
    hands them probabilities to read as log-probabilities: the loss goes below 0 and falls as the
    probabilities rise, whatever the targets. A Poisson NLL whose log-rate comes out of exp,
    softplus or relu predicts rates of at least 1 (watcher/poisson_terms.py). Under any objective,
    probabilities squashed again (Categorical(logits=probs), DiceLoss(softmax=True) on them) stay
    from 0 and 1 (watcher/renormalised.py); kl_div taking them as log-probabilities teaches the
    target's argmax (watcher/kl_inputs.py). Unscaled cosine logits stay above ln(1 + (C-1)/e²)
    (watcher/cosine_logits.py). A log_softmax over the classes, nll_loss or ctc_loss on it, and
    BCELoss on a sigmoid are right."""
    out: list[Finding] = []
    seen: dict[tuple[str, str], int] = {}
    for s in by_optimizer(run):
        kind = run.loss_kind(s.index)
        if kind is None or not kind.misfed() or not s.steps:
            continue
        term = kind.misfed()[0]
        key = (kind.where or "", term.misfed_detail or "")
        if key[0] and key in seen:  # one loss, one backward, stepping two optimizers
            first = out[seen[key]]
            also = f"the same loss, from the same backward, trains {s.name} too"
            out[seen[key]] = replace(first, evidence=(*first.evidence, also))
            continue
        seen[key] = len(out)
        _, losses = loss_steps(s)
        evidence = [f"loss graph: {kind.describe()}"]
        floor = kind.lower_bound()
        if floor and losses:
            evidence.append(
                f"lowest loss {num(min(losses))} over {len(losses)} steps; this loss is never "
                f"below {num(floor)}"
            )
        message = s.say(_message(kind, term))
        finding = this.finding(
            s.subject("loss"),
            message,
            fix_for(term),
            value=floor,
            evidence=tuple(evidence),
        )
        out.append(about(finding, [s.steps[0].step]))
    return out


def fix_for(term: LossTerm) -> str:
    """The advice for what fed the term: ctc_loss's own where it has one."""
    what = term.misfed or "softmax"
    return CTC_FIX.get(what, _FIX[what]) if term.kind == "ctc" else _FIX[what]


def _message(kind: LossKind, term: LossTerm) -> str:
    what = WHAT.get(term.misfed or "", "probabilities where the loss wants logits")
    at = f" (backward at {kind.where})" if kind.where else ""
    text = f"the loss is fed {what}: {term.misfed_detail}{at}"
    if term.floor is not None:
        text += (
            f"; it can never fall below {num(term.floor)} per target and its gradients are "
            "squashed with it"
        )
    return text
