"""Master weights kept by hand (GS411): a float16 or bfloat16 model whose optimizer steps
float32 copies of its parameters (apex's O2, Megatron's flat buffer), the gradients copied
into the masters and the masters copied back after each step. The model's parameters are
in no param group by design; their values move only by that copy back. No torch."""

from __future__ import annotations

import math
from dataclasses import replace

from gradscope.findings import RULES, Finding, Severity
from gradscope.rules.step_common import values_changed
from gradscope.steps.records import ParamInfo, WatchRun

_LOW = frozenset({"float16", "bfloat16"})
"""Dtypes a model keeps beside higher-precision masters (float8 weights are cast copies)."""


def mirrored(run: WatchRun) -> frozenset[int]:
    """Positions of the model's trainable parameters outside every optimizer that the
    optimizers step as masters: those parameters are all in a low-precision dtype, and the
    optimizers hold float32 tensors no model holds whose element counts add up to theirs
    (one master per tensor, or one flat buffer). A layer replaced after the optimizer was
    built leaves its old tensor behind too, but in the dtype of the new one."""
    outside = [
        i
        for i, p in enumerate(run.params)
        if p.in_model and p.requires_grad and not p.in_optimizer and p.idle_optimizer is None
    ]
    masters = [q for q in run.params if q.in_optimizer and not q.in_model and not q.one_step]
    if not outside or not masters:
        return frozenset()
    if not all(run.params[i].dtype in _LOW for i in outside):
        return frozenset()
    if any(q.dtype != "float32" for q in masters):
        return frozenset()
    counts = sum(math.prod(run.params[i].shape) for i in outside)
    if counts != sum(math.prod(q.shape) for q in masters):
        return frozenset()
    return frozenset(outside)


def finding(run: WatchRun, p: ParamInfo) -> Finding | None:
    """None where its values changed (the masters were copied back) or were not read; the
    error where they never changed: the optimizer steps the masters, and the model the loss
    is computed on stays at its first values."""
    if values_changed(p) is not False:
        return None
    message = (
        f"{p.name} ({p.dtype}) is in no optimizer param group, and the optimizers step "
        "float32 tensors no model holds with as many elements as the model's parameters left "
        f"out (master weights); its values never changed (norm {p.weight_norm:.3g} at the "
        "first step and at the end): the masters are never copied back into the model, so "
        "the loss is computed on weights no step moves"
    )
    advice = (
        "after each optimizer.step(), copy every master into its model parameter under "
        "torch.no_grad() (p.copy_(master)); a copy made before the step leaves the model one "
        "step behind"
    )
    evidence = (f"optimizers: {', '.join(run.optimizers)}",)
    made = RULES["GS411"].finding(p.name, message, advice, evidence=evidence)
    return replace(made, severity=Severity.ERROR)
