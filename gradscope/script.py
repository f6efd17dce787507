"""Inspect a training script as it is: run it until its first backward, then measure that.

The script runs as `python train.py ARGS` would (`__main__`, its folder on
sys.path, sys.argv set). Global module hooks note which modules run and in
what order; the first `loss.backward()` (or `torch.autograd.backward`) does
not run: it stops the script (script_stop makes that stop impossible to
swallow, and refuses every optimizer step), and gradscope differentiates that
loss itself with respect to the parameters of the outermost modules that ran
and that the loss reaches, exactly as `gradscope inspect` does for a factory
target. What the step hides is said in the report (script_facts).
"""

from __future__ import annotations

import os
import runpy
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

import torch
from torch import nn

from gradscope import hooks, probe, script_facts, script_stop
from gradscope.errors import TargetError, UserCodeError
from gradscope.stats import RunStats


class _Modules:
    """Every module call until the first backward: first-call order, and the outermost
    modules with trainable parameters."""

    def __init__(self) -> None:
        self.order: dict[int, int] = {}
        self.roots: dict[int, nn.Module] = {}
        self.depth = 0
        self.frozen = False
        self.scales: hooks.LossScales | None = None
        self.versions: dict[int, tuple[str, torch.Tensor, int]] = {}

    def enter(self, module: nn.Module) -> None:
        if not self.frozen:
            self.order.setdefault(id(module), len(self.order))
            if self.depth == 0 and any(p.requires_grad for p in module.parameters()):
                self.roots.setdefault(id(module), module)
        self.depth += 1

    def leave(self, _module: nn.Module) -> None:
        self.depth = max(self.depth - 1, 0)

    def freeze(self) -> None:
        """At the first backward: what ran until then is the step (a script that goes on
        after the stop must not add to it)."""
        self.frozen = True
        for root in self.roots.values():
            for name, p in root.named_parameters():
                self.versions[id(p)] = (name, p, p._version)

    def written(self) -> list[str]:
        """Parameters written in place since the first backward."""
        return [name for name, p, v in self.versions.values() if p._version != v]


def _model(roots: list[nn.Module]) -> nn.Module:
    """The one root, or a ModuleDict of several (a GAN's G and D) keyed by class name."""
    roots = [script_facts.unwrap_compiled(m) for m in roots]
    if len(roots) == 1:
        return roots[0]
    names: dict[str, nn.Module] = {}
    for m in roots:
        name = type(m).__name__
        names[name if name not in names else f"{name}_{len(names)}"] = m
    return nn.ModuleDict(names)


@contextmanager
def _watched(seen: _Modules) -> Iterator[None]:
    with (
        hooks.global_module_hooks(seen.enter, seen.leave),
        hooks.loss_scales() as scales,
        warnings.catch_warnings(),
    ):
        # gradscope's own global hooks are what torch.compile warns about here
        warnings.filterwarnings("ignore", message=r"Using `torch.compile\(module\)` when there")
        seen.scales = scales
        yield


def run(path: str, argv: Sequence[str] = ()) -> tuple[nn.Module, RunStats]:
    """Run `path` until its first backward; the model it trained and that step's stats."""
    if not os.path.isfile(path):
        raise TargetError(f"{path}: no such file")
    seen = _Modules()
    stopper = script_stop.Stopper(base=sys._getframe(), on_capture=seen.freeze)
    old_argv, old_path = sys.argv, list(sys.path)
    sys.argv = [path, *argv]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    ended: str | None = None
    try:
        with _watched(seen), script_stop.installed(stopper):
            runpy.run_path(path, run_name="__main__")
        ended = "it ran to its end"
    except script_stop.Stop:
        pass
    except SystemExit as exc:
        if stopper.capture is None and stopper.error is None:
            raise TargetError(
                f"{path} exited (code {exc.code}) before calling backward()"
            ) from None
        ended = f"it then called sys.exit({exc.code!r})"
    except Exception as exc:
        if stopper.capture is None and stopper.error is None:
            raise UserCodeError(f"running {path}", exc) from exc
        ended = f"it then raised {type(exc).__name__}"
    finally:
        sys.argv, sys.path[:] = old_argv, old_path
    if stopper.error is not None:
        raise TargetError(stopper.error)
    if stopper.capture is None:
        raise TargetError(f"{path} finished without calling backward(): nothing to inspect")
    return _measure(path, seen, stopper, ended)


def _measure(
    path: str, seen: _Modules, stopper: script_stop.Stopper, ended: str | None
) -> tuple[nn.Module, RunStats]:
    capture = stopper.capture
    assert capture is not None
    if not seen.roots:
        raise TargetError(
            f"{path} called backward() before any nn.Module with trainable parameters ran"
        )
    written = seen.written()
    if written:
        raise TargetError(
            f"{path} wrote to {', '.join(written[:3])} in place after its first backward() "
            "(not through a torch.optim optimizer: those are refused); that step cannot be "
            "measured any more"
        )
    scale = seen.scales.get(capture.loss) if seen.scales is not None else None
    roots, left_out = script_facts.reached(list(seen.roots.values()), capture.loss)
    model = _model(roots)
    order = {name: seen.order[id(m)] for name, m in model.named_modules() if id(m) in seen.order}
    source = f"the first backward() of {os.path.basename(path)}"
    if capture.where:
        source += f" ({capture.where})"
    notes = [
        script_facts.loss_scaling(scale.loss if scale is not None else capture.loss),
        _left_out(left_out),
        stopper.carried_on(ended),
    ]
    source = "; ".join([source, *(n for n in notes if n)])
    stats = probe.measure(
        model, capture.loss, capture.gradient, source, order, time.perf_counter(), scale
    )
    stats = script_facts.strip_compiled_names(stats, model)
    return model, replace(stats, timed="backward+stats (the forward ran in the script)")


def _left_out(models: list[nn.Module]) -> str | None:
    if not models:
        return None
    names = ", ".join(type(script_facts.unwrap_compiled(m)).__name__ for m in models)
    whose = "its" if len(models) == 1 else "their"
    return f"{names} ran before it but this loss reaches none of {whose} parameters: left out"
