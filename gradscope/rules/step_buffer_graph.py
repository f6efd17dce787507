"""GS476: a buffer that chains every step's graph to the one before, on a run that need not
fail: written each step from its own last value and a tensor with a graph while grad mode
was on (SNGP's precision matrix `precision = m * precision + phi.T @ phi` without
torch.no_grad()), it keeps the activations of every step since its last reset alive. No
backward reads it, so none fails (GS459 names the buffers a failing backward reaches); the
memory grows with each step instead (watcher/carried_graph.py). No torch."""

from __future__ import annotations

from gradscope.config import Thresholds
from gradscope.findings import Finding, Severity
from gradscope.fmt import listed
from gradscope.rules.registry import DECLARED, Rule, Stage, rule
from gradscope.rules.step_common import about
from gradscope.steps.records import WatchRun


@rule(
    "GS476",
    "buffer-graph-grows",
    Severity.WARNING,
    "oom",
    Stage.WATCH,
    "watch: a model's buffer holds a graph spanning steps: updated from itself and a "
    "tensor with a graph while grad mode was on, it keeps every step's activations alive",
    example="SNGP's Laplace precision accumulated in the forward as `self.precision = "
    "0.999 * self.precision + phi.T @ phi` without torch.no_grad()",
    fix="update the buffer under torch.no_grad() (or from phi.detach()); it is a statistic, "
    "not a term of the loss",
    objectives="any: the buffer's graph, independent of the loss",
)
def buffer_graph_grows(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """At a read step's first backward, a watched model's buffer held autograd nodes the
    previous step built and nodes older still: each write read the buffer's last value
    with its graph, so its graph reaches back through every step since it was last reset,
    holding their saved activations (the tutorial's "graph not released" row). A buffer
    re-made from each step's forward alone, or from a graph built once before the loop,
    spans no two steps and is not this; nor is a buffer written under torch.no_grad()."""
    if run.growing_graph is None:
        return []
    step, buffers = run.growing_graph
    finding = this.finding(
        "buffers",
        f"the model's buffer {listed(buffers)} holds an autograd graph that spans steps at "
        f"step {step}: it was updated while grad mode was on from tensors with a graph, its "
        "own last value among them, so each step's graph is chained to the one before and the "
        "activations of every step since its last reset stay in memory (no backward reads "
        "it, so nothing fails: the memory grows instead)",
        "update the buffer under torch.no_grad() (decorate the method that writes it, or "
        "write it from .detach()ed tensors): a running statistic such as a GP head's "
        "precision matrix is not a term of the loss",
        evidence=(f"read at step {step}", f"buffers: {listed(buffers)}"),
    )
    return [about(finding, [step])]
