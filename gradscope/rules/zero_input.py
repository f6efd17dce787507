"""A weight whose gradient is exactly 0 at every step while its layer's bias learns: the
layer's input was 0 (GS413).

A linear or convolutional layer's bias gradient is the loss's gradient at its outputs,
summed; its weight's is that gradient weighted by the layer's inputs. The bias learning
says the signal reached the layer; the weight getting exact zeros all the same says the
input it multiplies was 0 wherever that signal was not: a placeholder feature (gluonts'
TemporalFusionTransformerEstimator fills a missing feat_static_real with [0.0] and
projects it by a Linear, gluonts/torch/model/tft/estimator.py), or a dead layer before it,
whose own tensors then never learn either: only where every other tensor learned are
the zeros the input's own, information. Nothing is cut between the loss and this layer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from gradscope.findings import Finding, Severity
from gradscope.steps.records import WatchRun


def learned_bias(run: WatchRun, i: int, got_grad: Callable[[WatchRun, int], bool]) -> str | None:
    """The name of the bias beside weight i (a matrix or a kernel) when that bias learned
    and so did every other tensor trained, but for weights like this one: the zeros came
    from outside the model. A zero the model made (a layer before it dead, its output
    masked) starves that layer too, and this weight's zeros stay a symptom of it."""
    if _bias_learned(run, i, got_grad) is None:
        return None
    starved = (
        j
        for j, q in enumerate(run.params)
        if q.requires_grad and q.in_optimizer and not got_grad(run, j)
    )
    if any(_bias_learned(run, j, got_grad) is None for j in starved):
        return None
    return _bias_learned(run, i, got_grad)


def _bias_learned(run: WatchRun, i: int, got_grad: Callable[[WatchRun, int], bool]) -> str | None:
    p = run.params[i]
    if not p.name.endswith("weight") or len(p.shape) < 2:
        return None
    name = p.name[: -len("weight")] + "bias"
    j = next((j for j, q in enumerate(run.params) if q.name == name and q.requires_grad), None)
    return name if j is not None and got_grad(run, j) else None


def as_information(finding: Finding, weight: str, bias: str, steps: int) -> Finding:
    """GS413's finding on a weight whose input was 0, said as information."""
    return replace(
        finding,
        severity=Severity.INFO,
        message=(
            f"{weight} got only zero gradients in all {steps} steps while {bias} learned: "
            "the signal reached its layer, and the weight's gradient is that signal times "
            "the layer's input, which was 0 at every step; the weight multiplies nothing"
        ),
        advice=(
            "nothing to fix where that input is a placeholder (a library's dummy feature "
            "of zeros); if it should carry data, look at what feeds the layer (a feature "
            "column left at 0, a dead layer before it)"
        ),
    )
