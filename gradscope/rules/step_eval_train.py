"""GS444: an evaluation run in train mode, from the trained models' forwards under
torch.no_grad() or inference_mode while in train mode (watcher/eval_passes.py). No torch."""

from __future__ import annotations

from dataclasses import replace

from gradscope.config import Thresholds
from gradscope.findings import RULES, Finding, Severity
from gradscope.rules.registry import Stage, rule
from gradscope.rules.step_common import about
from gradscope.steps.records import WatchRun
from gradscope.steps.state_facts import TrainModeEval

RECIPE = 0.5
"""Forwards without gradients at half the run's steps or more are part of each step (a
guess of labels, an RL policy acting, a checkpointed forward): not an evaluation."""
SHOWN = 4


@rule(
    "GS444",
    "evaluated-in-train",
    Severity.WARNING,
    "eval-mode",
    Stage.WATCH,
    "watch: a trained model ran forward under torch.no_grad() or inference_mode (an "
    "evaluation) while in train mode, with BatchNorms whose running statistics absorbed "
    "it (a warning) or dropouts that made its numbers noisy (information)",
    example="`with torch.no_grad(): val_loss = loss_fn(model(x_val), y_val)` every 10 "
    "steps, without model.eval() before it",
    fix="call model.eval() before the evaluation and model.train() after it",
    objectives="any: the trained model's mode at a forward without gradients, a mechanism "
    "in the call order whatever the loss means",
)
def evaluated_in_train(run: WatchRun, t: Thresholds) -> list[Finding]:
    """A model whose parameters an optimizer trains ran a forward without gradients while
    in train mode, at some points of the run but not at most of its steps: an
    evaluation in train mode. Its BatchNorms normalise each evaluation batch with that
    batch's own statistics and fold it into their running ones (the evaluation data
    leaks into the model, whose eval-mode outputs change after every evaluation): a
    warning. With only dropouts the evaluation's numbers are noisy and pessimistic and
    nothing in the model changes: information. Silent on a model in eval mode, on a
    model without dropout or BatchNorm (the modes are the same), on BatchNorms with a
    cumulative average (momentum None: swa_utils.update_bn recalibrating them on
    purpose), on a copy that no optimizer trains (an EMA teacher, an RL or BYOL target
    network: not hooked) and on forwards without gradients at half the run's steps or
    more (a recipe's every-step forward: MixMatch's label guess, an RL policy acting,
    a forward checkpointed with use_reentrant). Passes on the same input at one point of
    the run, with dropouts only, are Monte Carlo dropout: information that says so; so are
    passes inside torch.func.vmap with randomness='different' (a mask per lane). Passes with
    BatchNorms only after the last optimizer step, followed by forwards in eval mode, are a
    recalibration of the statistics on new data (AdaBN, BN-adapt with the default momentum):
    information that says so."""
    out = []
    for ev in run.state_facts.train_evals:
        if ev.of and ev.steps >= RECIPE * ev.of and ev.of > 1:
            continue
        out.append(about(_finding(ev), [max(1, ev.first)]))
    return out


def _finding(ev: TrainModeEval) -> Finding:
    where = f" at {ev.where}" if ev.where else ""
    after = f"after step {ev.first}" if ev.first else "before the first step"
    parts = []
    if ev.norms:
        parts.append(
            f"its {_count(ev.norms, 'BatchNorm')} normalised with each evaluation batch's "
            "own statistics and folded them into their running ones"
        )
    if ev.dropouts:
        parts.append(f"its {_count(ev.dropouts, 'dropout')} dropped activations")
    message = (
        f"{ev.model} ran forward without gradients{where}, first {after}, while in train "
        "mode: an evaluation in which " + " and ".join(parts)
    )
    advice = f"call model.eval() before the evaluation{where} and model.train() after it" + (
        ": the running statistics now hold evaluation data" if ev.norms else ""
    )
    count = f"{ev.passes} forward(s) without gradients in train mode"
    modules = (
        f"{kind} in train mode: {', '.join(names[:SHOWN])}{' …' if len(names) > SHOWN else ''}"
        for kind, names in (("BatchNorms", ev.norms), ("dropouts", ev.dropouts))
        if names
    )
    evidence = (f"{count}, at {ev.steps} of the run's {ev.of} steps", *modules)
    finding = RULES["GS444"].finding(
        ev.model, message, advice, value=float(ev.passes), evidence=evidence
    )
    if not ev.norms and ev.lanes == ev.passes:
        return _lanes(finding, ev, where)
    if not ev.norms and ev.resampled and ev.resampled >= ev.passes - ev.steps:
        return _monte_carlo(finding, ev, where)
    if ev.norms and ev.used_after and ev.of and ev.first >= ev.of and ev.steps == 1:
        return _recalibrated(finding, ev, where)
    return finding if ev.norms else replace(finding, severity=Severity.INFO)


def _recalibrated(finding: Finding, ev: TrainModeEval, where: str) -> Finding:
    """Every such pass came after training ended and the model then ran in eval mode on the
    statistics they left: re-estimated on purpose (AdaBN), not an evaluation's leak."""
    return replace(
        finding,
        severity=Severity.INFO,
        message=(
            f"{ev.model} ran {ev.passes} forward(s) without gradients{where} in train mode "
            f"after its last optimizer step (step {ev.of}), then ran in eval mode: its "
            f"{_count(ev.norms, 'BatchNorm')} re-estimated their running statistics on those "
            "batches and the model used them, a recalibration (AdaBN, BN-adapt)"
        ),
        advice=(
            "nothing to fix if the statistics are re-estimated on purpose; if those forwards "
            f"were an evaluation, call model.eval() before it{where}: they folded its data "
            "into the running statistics"
        ),
    )


def _monte_carlo(finding: Finding, ev: TrainModeEval, where: str) -> Finding:
    """Each evaluation ran the same input through the model several times with its dropouts
    on: stochastic passes to average, Monte Carlo dropout, which needs train mode."""
    per = round(ev.passes / max(ev.steps, 1))
    return replace(
        finding,
        severity=Severity.INFO,
        message=(
            f"{ev.model} ran forward without gradients{where} in train mode, {per} times on "
            f"the same input at each of {ev.steps} evaluations: its "
            f"{_count(ev.dropouts, 'dropout')} drew a new mask each time, as Monte Carlo "
            "dropout averages over"
        ),
        advice=(
            "nothing to fix if the passes sample the dropouts on purpose (MC dropout); for a "
            "plain evaluation call model.eval() before it and model.train() after it"
        ),
    )


def _lanes(finding: Finding, ev: TrainModeEval, where: str) -> Finding:
    """Every such forward ran inside torch.func.vmap with randomness='different': the
    script asked for a new dropout mask per lane, the samples Monte Carlo dropout averages
    (vmap refuses dropout unless told how to draw it)."""
    return replace(
        finding,
        severity=Severity.INFO,
        message=(
            f"{ev.model} ran forward without gradients{where} in train mode inside "
            "torch.func.vmap with randomness='different', at each of "
            f"{ev.steps} evaluations: its {_count(ev.dropouts, 'dropout')} drew a new mask "
            "per lane, the samples Monte Carlo dropout averages over"
        ),
        advice=(
            "nothing to fix if the lanes sample the dropouts on purpose (MC dropout); for a "
            "plain evaluation call model.eval() before it and model.train() after it"
        ),
    )


def _count(names: tuple[str, ...], kind: str) -> str:
    return f"{kind} {names[0]}" if len(names) == 1 else f"{len(names)} {kind}s"
