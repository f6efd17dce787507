"""What a training script's first step hides, said plainly in the report.

- Gradient accumulation: the tensor backwarded is often `loss / accum_steps`;
  the report's loss and gradients are that value's, which the user should know.
- `torch.compile(model)` wraps the model, and every name gains `_orig_mod.`,
  so `ignore` globs from a config stop matching: the wrapper is seen through.
- A model that ran but that the loss does not reach (a GAN's generator behind
  `fake.detach()`, a teacher under `no_grad`) is not part of this step; reporting
  it would flag every one of its parameters as having no gradient.
"""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from numbers import Number
from typing import Any

import torch
from torch import nn

from gradscope.autograd_walk import saved
from gradscope.inspector import hooks, mean_by_hand
from gradscope.stats import ModuleStats, RunStats

# --- gradient accumulation -----------------------------------------------------------------------


def loss_scaling(loss: torch.Tensor) -> str | None:
    """'the loss backwarded is X (= Y / 4: gradient accumulation?)' when `loss` is another
    scalar divided (or multiplied) by a constant; None otherwise, or where the constant is
    the number of terms the scalar adds up (a mean written by hand)."""
    node = loss.grad_fn
    if node is None or loss.numel() != 1:
        return None
    name = node.name()
    dividing = name.startswith("DivBackward")
    if not (dividing or name.startswith("MulBackward")):
        return None
    factor = constant_factor(node, dividing)
    if factor is None or factor in (0.0, 1.0) or not math.isfinite(factor):
        return None
    dividend = next(n for n, _ in node.next_functions if n is not None)
    if dividing and mean_by_hand.averages(dividend, factor):
        return None  # a sum over n divided by n: a mean, whatever the steps accumulate
    if dividing and mean_by_hand.masked(dividend, factor):
        return None  # a masked sum divided by what its mask keeps: a masked mean
    value = float(loss.detach().reshape(-1)[0].real)
    if dividing:
        return (
            f"the loss backwarded is {value:.4g} (= {value * factor:.4g} / {factor:g}: "
            "gradient accumulation?)"
        )
    return (
        f"the loss backwarded is {value:.4g} (= {value / factor:.4g} × {factor:g}: "
        "gradient accumulation or a loss weight?)"
    )


def constant_factor(node: Any, dividing: bool) -> float | None:
    """The constant operand of a Div/Mul node whose other operand carries the gradient."""
    nexts = node.next_functions
    if len(nexts) == 1:  # the Scalar overloads: the constant is a Python number
        return _as_float(saved(node, "_saved_other"))
    if len(nexts) != 2 or (nexts[0][0] is None) == (nexts[1][0] is None):
        return None
    constant_slot = 0 if nexts[0][0] is None else 1
    if dividing and constant_slot == 0:
        return None  # c / loss is not a scaled loss
    return _as_float(saved(node, "_saved_self" if constant_slot == 0 else "_saved_other"))


def _as_float(value: Any) -> float | None:
    if isinstance(value, torch.Tensor):
        if value.numel() != 1 or value.requires_grad or value.is_complex():
            return None
        return float(value.detach().reshape(-1)[0])
    if isinstance(value, Number) and not isinstance(value, complex):
        return float(value)  # type: ignore[arg-type]
    return None


# --- torch.compile -------------------------------------------------------------------------------


def _is_compiled(module: nn.Module) -> bool:
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")  # no dynamo loaded: no wrapper
    return eval_frame is not None and isinstance(module, eval_frame.OptimizedModule)


def unwrap_compiled(module: nn.Module) -> nn.Module:
    """The module `torch.compile(module)` wrapped (the same parameters, without the prefix)."""
    while _is_compiled(module):
        inner = module._orig_mod
        assert isinstance(inner, nn.Module)
        module = inner
    return module


def strip_compiled_names(stats: RunStats, model: nn.Module) -> RunStats:
    """Names as they are without torch.compile: `enc._orig_mod.0.weight` → `enc.0.weight`."""
    wrapped = [name for name, m in model.named_modules() if _is_compiled(m)]
    if not wrapped:
        return stats
    prefixes = sorted((f"{n}._orig_mod" if n else "_orig_mod" for n in wrapped), key=len)

    def strip(name: str) -> str:
        for prefix in reversed(prefixes):  # innermost first
            if name == prefix or name.startswith(prefix + "."):
                outer = prefix.removesuffix("_orig_mod").removesuffix(".")
                name = outer + name[len(prefix) :] if outer else name[len(prefix) + 1 :]
        return name

    params = tuple(replace(p, name=strip(p.name), module=strip(p.module)) for p in stats.params)
    merged: dict[str, ModuleStats] = {}
    for m in stats.modules:  # the wrapper and what it wraps become one module
        m = replace(m, name=strip(m.name))
        old = merged.get(m.name)
        if old is not None:
            orders = [o for o in (old.order, m.order) if o is not None]
            m = replace(m, ran=m.ran or old.ran, order=min(orders) if orders else None)
        merged[m.name] = m
    return replace(stats, params=params, modules=tuple(merged.values()))


# --- which models the loss reaches ---------------------------------------------------------------


def reached(roots: list[nn.Module], loss: torch.Tensor) -> tuple[list[nn.Module], list[nn.Module]]:
    """(models whose parameters the loss's graph reaches, models it reaches not at all).

    When it reaches none of them, all are kept: a loss cut off from every model
    is the bug to report (GS101), not a model to leave out.
    """
    leaves = set()
    for node in hooks.graph_nodes(loss):
        variable = getattr(node, "variable", None)
        if isinstance(variable, torch.Tensor):
            leaves.add(id(variable))
    reach = [m for m in roots if any(id(p) in leaves for p in m.parameters())]
    if not reach:
        return roots, []
    return reach, [m for m in roots if all(m is not r for r in reach)]


def left_out(models: list[nn.Module]) -> str | None:
    """The note that names the models that ran before the loss and that it does not reach."""
    if not models:
        return None
    names = ", ".join(type(unwrap_compiled(m)).__name__ for m in models)
    whose = "its" if len(models) == 1 else "their"
    return f"{names} ran before it but this loss reaches none of {whose} parameters: left out"
