"""Inspect a training script as it is: run it until a backward, then measure that.

The script runs as `python train.py ARGS` would (`__main__`, its folder on
sys.path, sys.argv set). Global module hooks note which modules run and in
what order; the backward to inspect (the first `loss.backward()` or
`torch.autograd.backward`, or with `step=N` the first one after optimizer
step N-1, counted as `gradscope watch` counts steps) does not run: it stops
the script (script_stop makes that stop impossible to swallow, and refuses
every optimizer step), and gradscope differentiates that loss itself with
respect to the parameters of the outermost modules that ran and that the loss
reaches, exactly as `gradscope inspect` does for a factory target. What the
step hides is said in the report (script_facts).

A script's forward cannot be replayed on its own, so the explanation passes
of a factory target are done live instead (`explain=True`, script_live).
"""

from __future__ import annotations

import os
import runpy
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import NoReturn

import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook

from gradscope.errors import TargetError, UserCodeError
from gradscope.inspector import (
    batch_init,
    clamped_off,
    hooks,
    norm_feeds,
    optimizer_held,
    param_owners,
    probe,
    script_facts,
    script_stop,
    stop_patches,
    unran_parents,
)
from gradscope.inspector.script_live import LiveWatch
from gradscope.stats import RunStats

FIRST_NONFINITE = script_stop.FIRST_NONFINITE


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
        self.entered: dict[int, tuple[torch.Tensor, int, torch.Tensor | None]] = {}
        """id() of each module's own parameters -> (it, its version, a copy of a small one) as
        the module first entered forward."""
        self.feeds = norm_feeds.NormFeeds()
        self.stack: list[int] = []
        """id() of the modules inside their forward now, innermost last (for the live watch;
        not kept while torch.compile traces: what it compiles is not watched op by op)."""

    def enter(self, module: nn.Module) -> None:
        if not self.frozen:
            if id(module) not in self.order:
                self.order[id(module)] = len(self.order)
                self.entered.update(batch_init.as_entered(module))
            if self.depth == 0 and _outside_backward() and _trainable(module):
                self.roots.setdefault(id(module), module)
        self.depth += 1
        if not torch.compiler.is_compiling():
            self.stack.append(id(module))

    def leave(self, _module: nn.Module) -> None:
        self.depth = max(self.depth - 1, 0)
        if self.stack and not torch.compiler.is_compiling():
            self.stack.pop()

    def freeze(self) -> None:
        """At the first backward: what ran until then is the step (a script that goes on
        after the stop must not add to it)."""
        self.frozen = True
        for root in self.roots.values():
            for name, p in root.named_parameters():
                self.versions[id(p)] = (name, p, p._version)

    def unscaled(self, loss: torch.Tensor) -> torch.Tensor:
        """`loss` as it was before a GradScaler scaled it."""
        scale = self.scales.get(loss) if self.scales is not None else None
        return scale.loss if scale is not None else loss

    def into(self, stats: RunStats, model: nn.Module) -> RunStats:
        """`stats` with what the forward showed of `model`, at one step of the script."""
        fed, set_in = self.feeds.names(model), self.set_in_forward(model)
        return replace(stats, set_in_forward=set_in, norm_fed=fed, one_step_of_script=True)

    def set_in_forward(self, model: nn.Module) -> tuple[str, ...]:
        """Parameters of `model` their module wrote in place after its forward began and before
        the backward (a data-dependent initialisation on the batch measured)."""
        named = [(name, p) for name, p in model.named_parameters() if id(p) in self.entered]
        flags = batch_init.changed([self.entered[id(p)] for _, p in named])
        return tuple(name for (name, _), flag in zip(named, flags, strict=True) if flag)

    def written(self) -> list[str]:
        """Parameters written in place since the first backward."""
        return [name for name, p, v in self.versions.values() if p._version != v]


def _outside_backward() -> bool:
    """Not inside a backward: a checkpoint recomputing its region there calls a submodule
    with no module around it, and that submodule is not a model the script trains."""
    return torch._C._current_graph_task_id() == -1


def _trainable(module: nn.Module) -> bool:
    return any(_requires_grad(p) for p in module.parameters())


def _requires_grad(t: torch.Tensor) -> bool:
    """Under torch.func's transforms (a Lagrangian's Hessian by jacfwd over grad, vmapped) a
    module called by functional_call holds its parameters wrapped, and the wrapper does not
    say whether the tensor it wraps requires grad: asked of that tensor."""
    functorch = torch._C._functorch
    while functorch.is_functorch_wrapped_tensor(t):
        t = functorch.get_unwrapped(t)
    return t.requires_grad


def _model(roots: list[nn.Module]) -> nn.Module:
    """The one root, or a ModuleDict of several (a GAN's G and D) keyed by class name."""
    roots = [script_facts.unwrap_compiled(m) for m in unran_parents.lifted(roots)]
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
        norm_feeds.watching(seen.feeds),
        hooks.loss_scales() as scales,
        warnings.catch_warnings(),
    ):
        # gradscope's own global hooks are what torch.compile warns about here
        warnings.filterwarnings("ignore", message=r"Using `torch.compile\(module\)` when there")
        seen.scales = scales
        stepped = register_optimizer_step_post_hook(lambda *_: seen.entered.clear())
        try:  # a step moves every weight: what changed since is no initialisation from a batch
            yield
        finally:
            stepped.remove()


@dataclass
class Inspected:
    """A script's inspected step: the model it trained, its stats, and what the live watch
    found, as evidence for the findings it explains: 'non-finite' (GS102, GS103) and
    'none-grad:NAME' (GS101 of the parameter NAME)."""

    model: nn.Module
    stats: RunStats
    evidence: dict[str, list[str]] = field(default_factory=dict)


def run(path: str, argv: Sequence[str] = ()) -> tuple[nn.Module, RunStats]:
    """Run `path` until its first backward; the model it trained and that step's stats."""
    inspected = run_step(path, argv)
    return inspected.model, inspected.stats


def run_step(
    path: str,
    argv: Sequence[str] = (),
    step: int | str | None = None,
    explain: bool = False,
    found: Callable[[int, str], None] | None = None,
) -> Inspected:
    """Run `path` until the backward of optimizer step `step` and measure it.

    `step`: None, the first backward; N >= 1, the first backward after step N-1
    (the one whose gradients step N applies; steps numbered as `gradscope watch`
    numbers them); FIRST_NONFINITE, the first step whose loss or gradients are
    non-finite (the script runs once to find it and once more to stop there).
    `explain`: watch the step's forward live to say which op made NaN/Inf or cut
    the graph (costs one watched forward). `found(step, what)`: told between the two runs
    of FIRST_NONFINITE which step the first found ("loss" or "gradients").
    """
    if not os.path.isfile(path):
        raise TargetError(f"{path}: no such file")
    if step == FIRST_NONFINITE:
        if int(os.environ.get("WORLD_SIZE", "1") or 1) > 1:
            raise TargetError(
                f"--step {FIRST_NONFINITE} under torchrun: each rank would judge its own loss "
                "and stop at a different step; find the step with `gradscope watch`, then "
                "use --step N"
            )
        scan = _run_once(path, argv, FIRST_NONFINITE, explain=False)
        at = scan.stopper.found
        if at is None:
            raise TargetError(
                f"{path}: the loss and the gradients stayed finite over all "
                f"{_steps(scan.stopper.steps)} the script made: no non-finite step to inspect"
            )
        what = scan.stopper.found_by
        if found is not None:
            found(at, what)
        verb = "is" if what == "loss" else "are"
        why = f"the first step whose {what} {verb} non-finite (found by a first run; run again"
        return _run_once(path, argv, at, explain, why=why + " to stop there)").result()
    if step is not None and (isinstance(step, bool) or not isinstance(step, int) or step < 1):
        raise TargetError(
            f"step must be an optimizer step number >= 1 or {FIRST_NONFINITE!r}, not {step!r}"
        )
    return _run_once(path, argv, step, explain).result()


def _steps(n: int) -> str:
    return f"{n} optimizer step" + ("" if n == 1 else "s")


class _Run:
    def __init__(
        self,
        path: str,
        seen: _Modules,
        stopper: script_stop.Stopper,
        watch: LiveWatch | None,
        ended: str | None,
        why: str,
    ) -> None:
        self.path, self.seen, self.stopper, self.watch = path, seen, stopper, watch
        self.ended, self.why = ended, why

    def result(self) -> Inspected:
        return _measure(self.path, self.seen, self.stopper, self.ended, self.watch, self.why)


def _run_once(
    path: str, argv: Sequence[str], step: int | str | None, explain: bool, why: str = ""
) -> _Run:
    seen = _Modules()
    watch = LiveWatch(seen.stack) if explain else None
    stopper = script_stop.Stopper(
        base=sys._getframe(),
        on_capture=lambda: _captured(seen, watch),
        step=step,
        on_window=watch.start if watch is not None else lambda: None,
        unscaled=seen.unscaled,
    )
    old_argv, old_path = sys.argv, list(sys.path)
    sys.argv = [path, *argv]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    ended: str | None = None
    before = _before(step)
    try:
        with _watched(seen), stop_patches.installed(stopper):
            runpy.run_path(path, run_name="__main__")
        ended = "it ran to its end"
    except script_stop.Stop:
        pass
    except SystemExit as exc:
        if not stopper.stopped:
            raise TargetError(
                f"{path} exited (code {exc.code}) {before}{_made(stopper, step)}"
            ) from None
        ended = f"it then called sys.exit({exc.code!r})"
    except Exception as exc:
        if not stopper.stopped:
            raise UserCodeError(f"running {path}", exc) from exc
        ended = f"it then raised {type(exc).__name__}"
    finally:
        sys.argv, sys.path[:] = old_argv, old_path
        if watch is not None:
            watch.stop(final=True)
    if stopper.error is not None:
        raise TargetError(stopper.error)
    if step != FIRST_NONFINITE and stopper.capture is None:
        _refuse_uncaptured(path, step, stopper.steps)
    return _Run(path, seen, stopper, watch, ended, why)


def _refuse_uncaptured(path: str, step: int | str | None, steps: int) -> NoReturn:
    """The script ended without the backward asked for: why, in one line."""
    if isinstance(step, int) and steps < step:
        raise TargetError(
            f"{path}: the script made only {_steps(steps)}; there is no step {step} to inspect"
        )
    if isinstance(step, int) and step > 1:
        raise TargetError(
            f"{path}: no backward() came between optimizer steps {step - 1} and {step}"
        )
    raise TargetError(f"{path} finished without calling backward(): nothing to inspect")


_frozen_only = (
    " (the modules that ran are all frozen: the backward trains a plain tensor, an input "
    "or an image; inspect measures a model's parameters, `gradscope watch` this script's steps)"
)


_no_module = (
    " (no nn.Module ran: the backward trains tensors no module holds, a simulation's "
    "parameters or an input; inspect measures a model's parameters, `gradscope watch` this "
    "script's steps)"
)


def _before(step: int | str | None) -> str:
    if isinstance(step, int):
        return f"before the backward of step {step}"
    return "before calling backward()"


def _made(stopper: script_stop.Stopper, step: int | str | None) -> str:
    return f" (after {_steps(stopper.steps)})" if isinstance(step, int) and step > 1 else ""


def _captured(seen: _Modules, watch: LiveWatch | None) -> None:
    if watch is not None:
        watch.stop()
    seen.freeze()


def _source(path: str, step: int | str | None, where: str | None, why: str) -> str:
    """Which backward of the script was measured, and why that one."""
    name = os.path.basename(path)
    if step is None:
        source = f"the first backward() of {name}"
    else:
        source = f"the first backward() of optimizer step {step} of {name}"
    if where:
        source += f" ({where})"
    return f"{source}, {why}" if why else source


def _measure(
    path: str,
    seen: _Modules,
    stopper: script_stop.Stopper,
    ended: str | None,
    watch: LiveWatch | None,
    why: str = "",
) -> Inspected:
    capture = stopper.capture
    assert capture is not None
    if not seen.roots:  # its models used through methods of their own, not called
        seen.roots = {id(m): m for m in param_owners.owners(capture.loss)}
        seen.freeze()
    if not seen.roots:
        raise TargetError(
            f"{path} called backward() before any nn.Module with trainable parameters ran"
            + (_frozen_only if seen.order else _no_module)
        )
    if written := seen.written():
        raise TargetError(
            f"{path} wrote to {', '.join(written[:3])} in place after the backward() gradscope "
            "stopped it at (not through a torch.optim optimizer: those are refused); that step "
            "cannot be measured any more"
        )
    scale = seen.scales.get(capture.loss) if seen.scales is not None else None
    roots, left_out = script_facts.reached(list(seen.roots.values()), capture.loss)
    model = _model(roots)
    order = {name: seen.order[id(m)] for name, m in model.named_modules() if id(m) in seen.order}
    notes = [
        script_facts.loss_scaling(scale.loss if scale is not None else capture.loss),
        script_facts.left_out(left_out),
        stopper.carried_on(ended),
    ]
    source = "; ".join([_source(path, stopper.step, capture.where, why), *(n for n in notes if n)])
    off = clamped_off.switched_off(model, capture.loss)
    nodes = watch.watch_backward(capture.loss) if watch is not None else None
    taken = stopper.derivatives
    try:
        stats = probe.measure(
            model, capture.loss, capture.gradient, source, order, time.perf_counter(), scale, taken
        )
    finally:
        if nodes is not None:
            nodes.remove()
    stats = off.into(seen.into(stats, model))
    stats = optimizer_held.noted(script_facts.strip_compiled_names(stats, model), model)
    stats = replace(stats, timed="backward+stats (the forward ran in the script)")
    gradless = {p.name for p in stats.params if p.requires_grad and not p.has_grad}
    evidence = watch.evidence(model, nodes, gradless, capture.loss) if watch is not None else {}
    return Inspected(model, stats, evidence)
