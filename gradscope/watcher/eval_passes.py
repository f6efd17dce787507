"""Forwards of a trained model under torch.no_grad() or inference_mode while it is in
train mode: an evaluation pass whose dropouts still drop and whose BatchNorms still
normalise with the batch's statistics and fold the evaluation data into their running
ones.

One forward pre-hook per trained model (the models the optimizers' parameters belong to,
hooked from the first step on), and one on each of its direct parts that holds trained
parameters, for a model whose own forward is never called (skrl's `act` calls `compute`,
SB3's `action_log_prob` its layers): a forward in eval mode costs two flag reads, one with
gradients on a lookup (copies_through.py: a model holding no trained weight is searched
once); the model's dropout and BatchNorm modules are listed at its first forward in train
mode without gradients only. The hooks are left out of a model the script pickles
or copies (an EMA or target copy is not the trained model), and removed with the watch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import torch
from torch import nn

from gradscope.errors import user_line
from gradscope.hookable import hookable
from gradscope.steps.state_facts import TrainModeEval
from gradscope.watcher import discover
from gradscope.watcher.copies_through import CopiesThrough
from gradscope.watcher.library_dropped import LibraryDropped
from gradscope.watcher.modes import DROPOUTS, NORMS
from gradscope.watcher.moving_copies import MovingCopies, copies_of
from gradscope.watcher.no_grad_owners import NoGradOwners

MAX_STEPS = 4096
"""Distinct steps with such a pass kept at most: enough to tell every step from some."""


@dataclass
class Seen:
    """A trained model's forwards in train mode without gradients."""

    name: str
    first: int
    """Optimizer steps taken before its first such forward."""
    where: str | None
    dropouts: tuple[str, ...]
    norms: tuple[str, ...]
    passes: int = 0
    steps: set[int] = field(default_factory=set)
    resampled: int = 0
    """Passes on the same input as the pass before them, at the same step (MC dropout)."""
    lanes: int = 0
    """Passes inside vmap with randomness='different' (MC dropout's samples in one call)."""
    last: tuple[int, int, tuple[int, ...], float] | None = None
    used_after: bool = False
    """A forward without gradients in eval mode came after the first such pass: the running
    statistics those passes left were used (AdaBN's recalibration, then its evaluation)."""


class EvalPasses:
    def __init__(
        self,
        tracked: discover.Tracked,
        steps: Callable[[], int],
        trained: Callable[[], set[int]] = set,
    ) -> None:
        self.tracked = tracked
        self.steps = steps
        """The optimizer steps taken so far (WatchState.steps)."""
        self.seen: dict[int, Seen | None] = {}
        """id(model) → its passes (None: it has no dropout or BatchNorm that train mode
        changes, nothing to note)."""
        self._roots: dict[int, nn.Module] = {}
        self._handles: list[Any] = []
        self._ids: set[int] = set()
        self.on_fault: Callable[[str, BaseException], None] = lambda part, exc: None
        self.failed = False
        self.no_grad_steps = 0
        """Points of the run (optimizer steps taken) with a forward of a trained model
        without gradients, in either mode: an agent acting, a target or pseudo-label made
        from its own predictions, an evaluation. Counted, not kept: a long run has many."""
        self._last_no_grad = -1
        self._called: set[int] = set()
        """The trained models whose own forward ran (their parts then count for nothing)."""
        self.copies = MovingCopies()
        """Copies of the trained models (an EMA teacher) run without gradients."""
        self.owners = NoGradOwners()
        """The grad mode of the forwards of modules whose parameters had no gradient."""
        self.dropped = LibraryDropped(lambda part, exc: self.on_fault(part, exc))
        """Those modules, all a library's, whose output the outermost one left out."""
        self.through = CopiesThrough(trained)
        """Models holding no trained weight whose forward with gradients on is fed a trained
        network's output (a target critic valuing a differentiable rollout's last state)."""

    def attach(self) -> None:
        """Hook the trained models found since the last call (every optimizer step)."""
        if self.failed or len(self._roots) == len(self.tracked.roots):
            return
        for root in self.tracked.roots:
            if id(root) not in self._roots:
                self._roots[id(root)] = root
                if not hookable(root):
                    continue
                self._register(root, self._forward)
                for part in root.children():
                    if hookable(part) and any(p.requires_grad for p in part.parameters()):
                        self._register(part, partial(self._part_forward, id(root)))

    def hook_copies(self, roots: list[nn.Module], modules: list[nn.Module]) -> None:
        """Hook the copies of the trained `roots` among the live `modules` (the first
        step's scan, made for frozen_norms: no walk of its own)."""
        if self.failed or not modules:
            return
        try:
            names = discover.script_modules()
            for copy, root in copies_of(roots, modules):
                if not hookable(copy):
                    continue
                kind = type(root).__name__
                copy_name = names.get(id(copy), f"its {kind} copy in no optimizer")
                self.copies.originals[id(copy)] = (root, copy_name, names.get(id(root), kind))
                self._register(copy, self._copy_forward)
                for part in filter(hookable, copy.children()):  # SPR's target.encoder(x)
                    self._register(part, partial(self._copy_part_forward, copy))
        except Exception as exc:  # gradscope's own: this probe stops, the watch goes on
            self.failed = True
            self.on_fault("the evaluation-pass hook", exc)

    def hook_owners(self, roots: list[nn.Module], index: dict[int, int]) -> None:
        """At an optimizer's first step: hook the modules of `roots` holding a parameter
        without a gradient (no_grad_owners.py)."""
        if self.failed:
            return
        try:
            self.owners.watch(roots, index, self._register)
            self.dropped.watch(self.owners)
        except Exception as exc:  # gradscope's own: this probe stops, the watch goes on
            self.failed = True
            self.on_fault("the evaluation-pass hook", exc)

    def _register(self, module: nn.Module, hook: Callable[..., None]) -> None:
        handle = module.register_forward_pre_hook(hook)
        self._handles.append(handle)
        self._ids.add(handle.id)

    def module_hook_ids(self) -> frozenset[int]:
        """The ids of its forward pre-hooks (a copy or a ScriptModule drops them)."""
        return frozenset(self._ids)

    def remove(self) -> None:
        self.dropped.remove()
        while self._handles:
            self._handles.pop().remove()

    def wrap_getstate(self, original: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """`nn.Module.__getstate__`: a pickled or copied model carries none of these hooks."""

        def __getstate__(module: Any) -> Any:
            state = original(module)
            hooks = state.get("_forward_pre_hooks") if isinstance(state, dict) else None
            if self._ids and hooks and any(k in self._ids for k in hooks):
                state["_forward_pre_hooks"] = type(hooks)(
                    (k, v) for k, v in hooks.items() if k not in self._ids
                )
            return state

        return __getstate__

    def _forward(self, module: nn.Module, args: Any) -> None:
        if id(module) not in self._called:
            self._called.add(id(module))
        if self.failed or torch.jit.is_tracing():
            return
        try:
            if torch.is_grad_enabled():
                self.through.note(module, args)
                return
            if self._roots.get(id(module)) is module:
                self._count_no_grad()
            if module.training:
                self._note(module, args)
            elif (seen := self.seen.get(id(module))) is not None:
                seen.used_after = True
        except Exception as exc:  # gradscope's own: this probe stops, the watch goes on
            self.failed = True
            self.on_fault("the evaluation-pass hook", exc)

    def _part_forward(self, root: int, _module: nn.Module, _args: Any) -> None:
        """A part of a trained model run without gradients while the model's own forward
        never ran: the model ran so, by its parts."""
        if torch.is_grad_enabled() or self.failed or root in self._called or torch.jit.is_tracing():
            return
        try:
            self._count_no_grad()
        except Exception as exc:  # gradscope's own: this probe stops, the watch goes on
            self.failed = True
            self.on_fault("the evaluation-pass hook", exc)

    def _count_no_grad(self) -> None:
        if self.steps() != self._last_no_grad:
            self._last_no_grad = self.steps()
            self.no_grad_steps += 1

    def _copy_forward(self, module: nn.Module, _args: Any) -> None:
        if torch.is_grad_enabled() or self.failed or torch.jit.is_tracing():
            return
        try:
            self.copies.ran(module, self.steps())
        except Exception as exc:  # gradscope's own: this probe stops, the watch goes on
            self.failed = True
            self.on_fault("the evaluation-pass hook", exc)

    def _copy_part_forward(self, copy: nn.Module, _module: nn.Module, args: Any) -> None:
        """A part of a copy ran: the copy did (a target called by its parts)."""
        self._copy_forward(copy, args)

    def _note(self, module: nn.Module, args: Any) -> None:
        if self._roots.get(id(module)) is not module:
            return  # a copy that kept the hook some other way: not the trained model
        steps = self.steps()
        if id(module) not in self.seen:
            if _recalibrating(module):
                return  # swa_utils.update_bn's pass: not an evaluation, and not cached
            dropouts, norms = _in_train_mode(module)
            self.seen[id(module)] = (
                Seen(type(discover.unwrapped(module)).__name__, steps, user_line(), dropouts, norms)
                if dropouts or norms
                else None
            )
        seen = self.seen[id(module)]
        if seen is not None:
            seen.passes += 1
            if len(seen.steps) < MAX_STEPS:
                seen.steps.add(steps)
            key = _input_key(steps, args)
            seen.resampled += key is not None and key == seen.last
            seen.lanes += _masks_per_lane()
            seen.last = key

    def facts(self, taken: int) -> list[TrainModeEval]:
        """What was seen, against the `taken` optimizer steps of the run."""
        return [
            TrainModeEval(
                s.name,
                s.first,
                s.passes,
                len(s.steps),
                taken,
                s.dropouts,
                s.norms,
                s.where,
                s.resampled,
                s.lanes,
                s.used_after,
            )
            for s in self.seen.values()
            if s is not None
        ]


def _input_key(steps: int, args: Any) -> tuple[int, int, tuple[int, ...], float] | None:
    """The step, the first tensor argument's storage and shape and a sum of its first values
    (a new batch in a freed one's storage differs there): the same input again."""
    first = args[0] if isinstance(args, tuple) and args else None
    if not isinstance(first, torch.Tensor) or first.is_complex() or first.is_meta:
        return None
    if first.layout != torch.strided or first.numel() == 0:
        return None
    if torch._C._functorch.is_functorch_wrapped_tensor(first):
        return None  # a lane of torch.func.vmap (or a grad transform's): no storage to read
    head = first.detach().reshape(-1)[:64]
    return steps, first.data_ptr(), tuple(first.shape), float(head.double().sum())


def _masks_per_lane() -> bool:
    """Inside torch.func.vmap with randomness='different' (the innermost transform): each
    lane of the call draws its own dropout masks, the samples of Monte Carlo dropout in one
    pass (vmap's default refuses dropout; 'same' draws one mask for all lanes)."""
    if torch._C._functorch.maybe_current_level() is None:
        return False
    try:
        from torch._functorch.pyfunctorch import retrieve_current_functorch_interpreter

        current: Any = retrieve_current_functorch_interpreter()  # VmapInterpreter: randomness()
        return current.key().name == "Vmap" and str(current.randomness()) == "different"
    except (ImportError, AttributeError, RuntimeError):  # an older or newer torch
        return False


def _recalibrating(root: nn.Module) -> bool:
    """A BatchNorm of the root in train mode keeps a cumulative average (momentum None):
    its statistics are being recomputed on purpose (swa_utils.update_bn sets it)."""
    return any(isinstance(m, NORMS) and m.training and m.momentum is None for m in root.modules())


def _in_train_mode(root: nn.Module) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The root's dropouts (p > 0) and BatchNorms that train mode changes: in training
    mode themselves, the BatchNorms tracking running statistics."""
    dropouts, norms = [], []
    for name, m in root.named_modules():
        if not m.training:
            continue
        if isinstance(m, DROPOUTS) and getattr(m, "p", 0) > 0:
            dropouts.append(name)
        elif isinstance(m, NORMS) and m.track_running_stats:
            norms.append(name)
    return tuple(dropouts), tuple(norms)
