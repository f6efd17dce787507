"""A loss fed probabilities where it wants logits, on an inspected pass (GS432): what the
loss's graph shows, before any training. No torch.

The same mechanism as watch's GS431 (rules/step_logits.py), read by `inspect` from the
one forward+backward it runs on a model file or a script's step.
"""

from __future__ import annotations

from gradscope.config import Thresholds
from gradscope.findings import Finding, Rule, Severity
from gradscope.fmt import num
from gradscope.rules.registry import DECLARED, Stage, rule
from gradscope.rules.step_logits import (
    BCE_SOFTMAX_FIX,
    COSINE_FIX,
    KL_FIX,
    LOG_SIGMOID_FIX,
    LOG_TARGET_FIX,
    LOGIT_TARGETS_FIX,
    SQUASHED_FIX,
)
from gradscope.rules.step_logits import WHAT as STEP_WHAT
from gradscope.stats import RunStats

FIX = {
    "softmax": "pass the raw logits to cross_entropy (drop the softmax before it)",
    "sigmoid": "pass the raw logits to binary_cross_entropy_with_logits (drop the sigmoid), "
    "or keep the sigmoid and use binary_cross_entropy (BCELoss)",
    "softmax-wrong-dim": "drop the softmax and pass the raw logits, classes on dim 1 (or the "
    "last dim, flattened to (N, C))",
    "log-softmax-wrong-dim": "take log_softmax over the classes (dim=-1 for (..., C) logits)",
    "softmax-not-log": "take log_softmax where the softmax is (nll_loss and ctc_loss want "
    "log-probabilities), or return raw logits and use cross_entropy in place of nll_loss",
    "softmax-kl-input": KL_FIX,
    "probs-as-log-target": LOG_TARGET_FIX,
    "softmax-as-bce-logits": BCE_SOFTMAX_FIX,
    "logits-as-targets": LOGIT_TARGETS_FIX,
    "squashed-twice": SQUASHED_FIX,
    "sigmoid-as-log-sigmoid-logits": LOG_SIGMOID_FIX,
    "cosine-unscaled": COSINE_FIX,
    "rate-as-log-rate": "drop the positive link and pass the raw output (the log-rate) with "
    "log_input=True, or keep the link and pass log_input=False",
    "softmax-as-logits": "hand the distribution (or log_softmax) the raw logits "
    "(Categorical(logits=z), log_softmax(z), the softmax dropped from the model), or its "
    "probabilities as Categorical(probs=p) or p.log()",
}

WHAT = {
    **STEP_WHAT,
    "softmax": "probabilities where it wants logits",
    "sigmoid": "probabilities where it wants logits",
    "softmax-wrong-dim": "a softmax over the wrong axis where it wants logits",
}
"""What fed the loss, as step_logits.WHAT says it, less the loss's name where the detail
after it names the loss."""


@rule(
    "GS432",
    "loss-fed-probs",
    Severity.ERROR,
    "logits",
    Stage.RUN,
    "inspect: the loss's graph shows a softmax under cross_entropy, a sigmoid or softmax under "
    "binary_cross_entropy_with_logits or a softmax with no log under nll_loss or ctc_loss, or "
    "a (log_)softmax over another axis than the classes, a Poisson NLL on a log-rate "
    "(log_input=True) that comes out of exp, softplus or relu, or a softmax's probabilities "
    "normalised again as logits (Categorical(logits=probs)) or taken by kl_div as "
    "log-probabilities, or soft targets with a negative entry (logits) under cross_entropy",
    example="a classifier whose forward ends in nn.Softmax, inspected with "
    "`--loss cross_entropy`: the loss can never fall below ln(1 + (C-1)/e)",
    fix="return the raw logits from the model (or drop the softmax or sigmoid before the loss); "
    "a log_softmax over the classes before cross_entropy or nll_loss is right as it is",
    objectives=(
        "a cross-entropy or binary_cross_entropy_with_logits, read from the loss's graph: "
        "they want logits; nll_loss and ctc_loss want log-probabilities (a log_softmax over "
        "the classes, ctc_loss's last dim; the log of the user's own probabilities); BCELoss "
        "on a sigmoid is right; a Poisson NLL exp(x) - y·x wants a log-rate x of any sign; "
        "under any objective, probabilities normalised again as logits; kl_div wants "
        "log-probabilities as its input, and as its target with log_target=True; other losses "
        "are not judged"
    ),
)
def loss_fed_probabilities(
    stats: RunStats, t: Thresholds, *, this: Rule = DECLARED
) -> list[Finding]:
    """The loss's autograd graph shows cross_entropy's own LogSoftmaxBackward0 over a
    SoftmaxBackward0, a Sigmoid- or SoftmaxBackward0 under binary_cross_entropy_with_logits,
    or a softmax or log_softmax whose dim is not the loss's class dim (followed through views
    and transposes). The output is squashed twice: the loss cannot fall below ln(1 + (C-1)/e) for C
    classes or ln(1 + 1/e) = 0.31, and the gradients shrink; or it is normalised over the batch
    or the sequence. Read from the graph's shapes, before the backward."""
    out = []
    for fed in stats.fed_probabilities:
        floor = (
            f"; the loss can never fall below {num(fed.floor)} per target"
            if fed.floor is not None
            else ""
        )
        out.append(
            this.finding(
                "loss",
                f"the loss is fed {WHAT.get(fed.what, WHAT['softmax'])}: {fed.detail}{floor}",
                FIX.get(fed.what, FIX["softmax"]),
                value=fed.floor,
            )
        )
    return out
