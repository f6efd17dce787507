"""Inspect a training script as it is: run it until its first backward, then measure that.

The script runs as `python train.py ARGS` would (`__main__`, its folder on
sys.path, sys.argv set). Global module hooks note which modules run and in
what order; the first `loss.backward()` (or `torch.autograd.backward`) does
not run: it stops the script, and gradscope differentiates that loss itself
with respect to the parameters of the outermost modules that ran, exactly as
`gradscope inspect` does for a factory target.
"""

from __future__ import annotations

import os
import runpy
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import torch
from torch import nn

from gradscope import hooks, probe
from gradscope.errors import TargetError, UserCodeError
from gradscope.stats import RunStats


class _Captured(BaseException):
    """Raised by the patched backward; a BaseException so the script's `except` lets it by."""

    def __init__(self, loss: torch.Tensor, gradient: torch.Tensor | None):
        super().__init__()
        self.loss, self.gradient = loss, gradient


class _Modules:
    """Every module call: first-call order, and the outermost modules with trainable params."""

    def __init__(self) -> None:
        self.order: dict[int, int] = {}
        self.roots: dict[int, nn.Module] = {}
        self.depth = 0
        self.scales: hooks.LossScales | None = None

    def enter(self, module: nn.Module) -> None:
        self.order.setdefault(id(module), len(self.order))
        if self.depth == 0 and any(p.requires_grad for p in module.parameters()):
            self.roots.setdefault(id(module), module)
        self.depth += 1

    def leave(self, _module: nn.Module) -> None:
        self.depth = max(self.depth - 1, 0)

    def model(self) -> nn.Module:
        """The one root, or a ModuleDict of several (a GAN's G and D) keyed by class name."""
        roots = list(self.roots.values())
        if len(roots) == 1:
            return roots[0]
        names: dict[str, nn.Module] = {}
        for m in roots:
            name = type(m).__name__
            names[name if name not in names else f"{name}_{len(names)}"] = m
        return nn.ModuleDict(names)


@contextmanager
def _intercepted() -> Iterator[_Modules]:
    seen = _Modules()
    original_backward, original_autograd = torch.Tensor.backward, torch.autograd.backward

    def backward(self: torch.Tensor, gradient: Any = None, *_: Any, **__: Any) -> None:
        raise _Captured(self, gradient)

    def autograd_backward(tensors: Any, grad_tensors: Any = None, *_: Any, **__: Any) -> None:
        tensors = [tensors] if isinstance(tensors, torch.Tensor) else list(tensors)
        grads = [grad_tensors] if isinstance(grad_tensors, torch.Tensor) else grad_tensors
        if len(tensors) != 1:
            raise TargetError(
                "the script's first backward takes several tensors; gradscope "
                "inspects one loss: sum them first"
            )
        raise _Captured(tensors[0], grads[0] if grads else None)

    with hooks.global_module_hooks(seen.enter, seen.leave), hooks.loss_scales() as scales:
        seen.scales = scales
        torch.Tensor.backward = backward  # type: ignore[method-assign]
        torch.autograd.backward = autograd_backward
        try:
            yield seen
        finally:
            torch.Tensor.backward = original_backward  # type: ignore[method-assign]
            torch.autograd.backward = original_autograd


def run(path: str, argv: Sequence[str] = ()) -> tuple[nn.Module, RunStats]:
    """Run `path` until its first backward; the model it trained and that step's stats."""
    if not os.path.isfile(path):
        raise TargetError(f"{path}: no such file")
    saved: dict[tuple[int, int], int] = {}
    old_argv, old_path = sys.argv, list(sys.path)
    sys.argv = [path, *argv]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        with _intercepted() as seen, probe.saved_tensor_sizes(saved):
            runpy.run_path(path, run_name="__main__")
    except _Captured as captured:
        return _measure(path, seen, captured, saved)
    except SystemExit as exc:
        raise TargetError(f"{path} exited (code {exc.code}) before calling backward()") from None
    except TargetError:
        raise
    except Exception as exc:
        raise UserCodeError(f"running {path}", exc) from exc
    finally:
        sys.argv, sys.path[:] = old_argv, old_path
    raise TargetError(f"{path} finished without calling backward(): nothing to inspect")


def _measure(
    path: str, seen: _Modules, captured: _Captured, saved: dict[tuple[int, int], int]
) -> tuple[nn.Module, RunStats]:
    if not seen.roots:
        raise TargetError(
            f"{path} called backward() before any nn.Module with trainable parameters ran"
        )
    model = seen.model()
    order = {name: seen.order[id(m)] for name, m in model.named_modules() if id(m) in seen.order}
    source = f"the first backward() of {os.path.basename(path)}"
    scale = seen.scales.get(captured.loss) if seen.scales is not None else None
    stats = probe.measure(
        model, captured.loss, captured.gradient, source, order, time.perf_counter(), saved, scale
    )
    return model, replace(stats, timed="backward+stats (the forward ran in the script)")
