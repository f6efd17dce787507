"""GS440 (a model trained in eval mode) and GS441 (BatchNorm statistics that never
moved), from the modes watch read at the optimizer steps (watcher/modes.py). No torch."""

from __future__ import annotations

from dataclasses import replace

from gradscope.config import Thresholds
from gradscope.findings import RULES, Finding, Severity
from gradscope.rules.registry import Stage, rule
from gradscope.rules.step_common import about
from gradscope.rules.symptoms import DIVERGENCE
from gradscope.steps.records import WatchRun
from gradscope.steps.state_facts import EvalSpan, StillStats

SHOWN = 4


@rule(
    "GS440",
    "trained-in-eval",
    Severity.WARNING,
    "train-mode",
    Stage.WATCH,
    "watch: an optimizer trained a model that was in eval mode, so its dropouts did "
    "nothing and its BatchNorms used frozen running statistics",
    example="model.eval() before an evaluation inside the epoch loop, and no "
    "model.train() before the next training step",
    fix="call model.train() at the top of each training epoch (or right after the "
    "evaluation); to train without dropout on purpose, set its p to 0 instead; to freeze "
    "BatchNorms on purpose, switch only them to eval (the model stays in train mode)",
    objectives=(
        "any: the mode the model trained in, a mechanism independent of what the loss means"
    ),
    # BatchNorms in eval on statistics never measured normalise nothing: the run trains
    # an unnormalised network at a learning rate set for a normalised one
    explains=(*DIVERGENCE, "GS441"),
)
def trained_in_eval(run: WatchRun, t: Thresholds) -> list[Finding]:
    """At an optimizer step the model that owns its parameters had `training` False
    (`model.eval()` left on), and it holds modules that behave otherwise in train mode:
    a dropout with p > 0 beside trained parameters is the identity, and a BatchNorm
    whose weight is trained normalises with running statistics it no longer updates.
    Read from the host flag at every step: the first step in eval mode is the one
    reported. A BatchNorm put in eval on purpose while the model trains (a frozen
    backbone, mmdetection's norm_eval) leaves the model itself in train mode: silent;
    so is a model without dropout or BatchNorm, for which the modes are the same. A model
    put in eval before the first step and kept there, beside another that the same optimizer
    trains in train mode, has the shape of a network meant to stay fixed (a perceptual
    loss's features): the advice then offers freezing it before switching it to train.
    Trained modules left in train mode inside a host in eval (adapters or Flamingo's gated
    cross-attention inserted into a frozen LM kept in eval on purpose): the host's own
    dropouts are not counted, as a frozen backbone's are not.
    Where its BatchNorms' statistics were never measured (GS441: still mean 0, variance 1)
    they normalise nothing, and the blow-up that follows (an lr too high for the network
    without its normalisation, NaN, spikes) is its consequence. Trained weights that the
    script writes back between steps to the values a step started from (an episodic reset
    to a snapshot: MEMO and TTT adapt each test point from the source weights) are a
    test-time adaptation that keeps the source statistics on purpose, as a batch of one
    point's augmentations gives degenerate ones: information."""
    out = []
    for span in run.state_facts.eval_spans:
        finding = _eval_finding(run, span)
        if _episodic(run, span):
            finding = _episodic_finding(finding)
        out.append(about(finding, range(span.first, span.last + 1)))
    return out


def _episodic(run: WatchRun, span: EvalSpan) -> bool:
    """Every parameter the optimizer trains was put back to the values a step started from,
    after the step moved them: each adaptation starts again from one snapshot."""
    members = set(run.members_of(span.optimizer))
    return bool(members) and members <= set(run.state_facts.put_back)


def _episodic_finding(finding: Finding) -> Finding:
    return replace(
        finding,
        severity=Severity.INFO,
        message=finding.message
        + "; the script puts its trained weights back to the values a step started from "
        "between steps (an episodic reset to a snapshot, as MEMO and TTT adapt each test "
        "point from the source weights), where eval mode keeps the source statistics on "
        "purpose",
        advice="nothing to do if each adaptation is meant to normalise with the source "
        "statistics; if it is meant to use each test batch's own statistics (TENT), "
        + finding.advice,
    )


def _eval_finding(run: WatchRun, span: EvalSpan) -> Finding:
    parts = []
    if span.dropouts:
        parts.append(f"its {_count(span.dropouts, 'dropout')} passed inputs through unchanged")
    if span.norms:
        parts.append(
            f"its {_count(span.norms, 'BatchNorm')} normalised with running statistics "
            "they did not update"
        )
    whole = span.steps == span.of
    when = (
        f"at every one of its {span.steps} optimizer steps"
        if whole
        else f"at {span.steps} of its {span.of} optimizer steps, from step {span.first}"
    )
    where = f" (switched by eval() at {span.where})" if span.where else ""
    model = f"{span.named} ({span.model})" if span.named else span.model
    message = (
        f"{model} was in eval mode {when}{where} while "
        f"{run.optimizer_label(span.optimizer)} trained it: " + " and ".join(parts)
    )
    advice = (
        f"call model.train() before the training steps (after the eval() at {span.where})"
        if span.where
        else "call model.train() before the training steps"
    )
    if span.before_training and span.beside and whole:
        message += (
            f"; it was put in eval before training began, beside {span.beside} that the same "
            "optimizer trained in train mode: the shape of a network meant to stay fixed (a "
            "perceptual loss's features, a frozen pretrained backbone) whose weights the "
            "optimizer trains as well"
        )
        advice = (
            f"if {model} is meant to stay fixed, call requires_grad_(False) on it and "
            "leave its parameters out of the optimizer (in eval mode); if it is meant to learn, "
            + advice[0].lower()
            + advice[1:]
        )
    evidence = tuple(
        f"{kind}: {', '.join(names[:SHOWN])}{' …' if len(names) > SHOWN else ''}"
        for kind, names in (("dropouts", span.dropouts), ("BatchNorms", span.norms))
        if names
    )
    return RULES["GS440"].finding(
        span.model, message, advice, value=float(span.steps), evidence=evidence
    )


def _count(names: tuple[str, ...], kind: str) -> str:
    return f"{len(names)} {kind} module{'s' if len(names) > 1 else ''}"


@rule(
    "GS441",
    "batchnorm-stats-still",
    Severity.WARNING,
    "train-mode",
    Stage.WATCH,
    "watch: a trained BatchNorm's running statistics are still their initial mean 0 and "
    "variance 1 at the end of the run, so in eval mode it normalises nothing",
    example="nn.BatchNorm2d(64, momentum=0), or a BatchNorm frozen with bn.eval() in a "
    "model trained from scratch (no statistics were ever loaded)",
    fix="keep a momentum in (0, 1] (None: a cumulative average) and the BatchNorm in train "
    "mode while it trains; freeze a BatchNorm only with the statistics it was trained with",
    objectives=(
        "any: BatchNorm's running statistics, a mechanism independent of what the loss means"
    ),
)
def batchnorm_stats_still(run: WatchRun, t: Thresholds) -> list[Finding]:
    """A BatchNorm whose weight or bias had gradients, and whose running mean and
    variance are exactly their initial zeros and ones when the run ends (read once,
    then): they never moved. Its momentum is 0, or it was in eval mode at each step
    sampled, so what evaluation divides by was never measured. A BatchNorm frozen on
    purpose holds statistics loaded from a trained model, which are not zeros and ones,
    and a frozen one whose parameters are not trained either: both stay silent, as do
    BatchNorms GS440 already names (the whole model in eval mode)."""
    named = {
        n for s in run.state_facts.eval_spans if s.steps == s.of for n in s.norms
    }  # the model in eval throughout: GS440's
    out = []
    for still in run.state_facts.still_stats:
        if not still.trained or still.name in named:
            continue
        out.append(_still_finding(still))
    return out


def _still_finding(still: StillStats) -> Finding:
    if still.momentum == 0:
        why = "its momentum is 0, so each batch's statistics enter them with weight 0"
        advice = "give it a momentum in (0, 1] (the default 0.1; None averages every batch)"
    elif still.steps and still.eval_steps == still.steps:
        why = (
            f"it was in eval mode at every step sampled ({still.eval_steps}), frozen with "
            "statistics nobody measured"
        )
        advice = (
            "leave it in train mode while the model learns; freeze a BatchNorm only with "
            "the statistics of the model it comes from (load them before bn.eval())"
        )
    else:
        why = "no training forward updated them"
        advice = "check that the BatchNorm runs in train mode in the training forward"
    message = (
        f"the running statistics of {still.name} ({still.kind}) are still mean 0 and "
        f"variance 1 after the run: "
        f"{why}; evaluation will normalise with them"
    )
    return RULES["GS441"].finding(still.name, message, advice)
