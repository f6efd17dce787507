"""The mode each trained model was in at the optimizer steps, and its BatchNorms' statistics.

`model.eval()` left on through training turns every dropout into the identity and makes
every BatchNorm normalise with running statistics that it no longer updates. A step
reads one host flag per model (`module.training`); the model's dropout and BatchNorm
modules are listed only at a step where that flag is False. Whether a BatchNorm's
statistics ever moved is read once, when the run ends (`facts`). The script's
`eval()` / `train(False)` calls are noted with their file:line (patches/module_train.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from gradscope.steps.state_facts import EvalSpan, StillStats
from gradscope.watcher import discover

NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm)
DROPOUTS = (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout)
SAMPLE_EVERY = 25
"""Besides steps 1-3, the BatchNorms' own flags are read every this many steps."""


@dataclass
class Span:
    first: int
    last: int
    steps: int = 0
    dropouts: tuple[str, ...] = ()
    norms: tuple[str, ...] = ()
    where: str | None = None


@dataclass
class Modes:
    """What the steps saw; changed under the watch's lock."""

    roots_of: dict[int, tuple[Any, list[nn.Module]]] = field(default_factory=dict)
    """Optimizer index → (its members' key, the models that own its parameters)."""
    spans: dict[tuple[int, int], Span] = field(default_factory=dict)
    """(optimizer index, id(model)) → its steps in eval mode."""
    names: dict[int, str] = field(default_factory=dict)
    """id(model) → its class name."""
    script_names: dict[int, str | None] = field(default_factory=dict)
    """id(model) → the script's module-level name for it, read while the script runs."""
    norm_eval: dict[int, int] = field(default_factory=dict)
    """id(BatchNorm) → sampled steps it was in eval mode at."""
    sampled: int = 0
    calls: dict[int, str | None] = field(default_factory=dict)
    """id(module) → file:line of the script's last eval() / train(False) on it."""
    call_steps: dict[int, int] = field(default_factory=dict)
    """id(module) → optimizer steps taken when the script last switched it to eval."""
    in_train: dict[int, set[int]] = field(default_factory=dict)
    """Optimizer index → ids of its models that were in train mode at one of its steps."""
    known: frozenset[int] = frozenset()
    """ids of the models known at the last step's first backward: one found later (at its
    optimizer's first step) has its mode read at the step."""
    evaled: set[int] = field(default_factory=set)
    """ids of the modules switched to eval since the current step's first backward: at a
    step whose models were not yet known then, their forward ran in train mode."""

    def observe(
        self,
        tracked: discover.Tracked,
        index: int,
        members: Any,
        step: int,
        eval_roots: frozenset[int] | None = None,
    ) -> None:
        """Optimizer `index` steps (`members`: its parameters' positions); `eval_roots`:
        the models in eval mode at the step's first backward (None: read them now)."""
        cached = self.roots_of.get(index)
        if cached is None or cached[0] is not members:
            cached = self.roots_of[index] = (members, _roots(tracked, members))
        for root in cached[1]:
            if eval_roots is None or id(root) not in self.known:
                in_eval = not root.training and id(root) not in self.evaled
            else:
                in_eval = id(root) in eval_roots
            if in_eval:
                self._in_eval(tracked, index, members, root, step)
            else:
                self._in_train(index, root)
        if step <= 3 or step % SAMPLE_EVERY == 0:
            self.sampled += 1
            for root in cached[1]:
                for m in root.modules():
                    if isinstance(m, NORMS) and not m.training:
                        self.norm_eval[id(m)] = self.norm_eval.get(id(m), 0) + 1

    def _in_train(self, index: int, root: nn.Module) -> None:
        seen = self.in_train.setdefault(index, set())
        if id(root) not in seen:
            seen.add(id(root))
            self.names.setdefault(id(root), type(discover.unwrapped(root)).__name__)
            self.script_names.setdefault(id(root), discover.script_modules().get(id(root)))

    def _in_eval(
        self, tracked: discover.Tracked, index: int, members: Any, root: nn.Module, step: int
    ) -> None:
        key = (index, id(root))
        span = self.spans.get(key)
        if span is None or span.last < step - 1 or span.last == 0:
            trained = {id(tracked.params[i]) for i in members}
            dropouts, norms = _switched(root, trained)
            where = self.calls.get(id(root))
            if span is None:
                span = self.spans[key] = Span(step, step, 0, dropouts, norms, where)
            else:  # eval again after steps in train mode: the later switch is the one
                span.dropouts, span.norms = dropouts, norms
                span.where = where or span.where
            self.names[id(root)] = type(discover.unwrapped(root)).__name__
            self.script_names.setdefault(id(root), discover.script_modules().get(id(root)))
        span.last = step
        span.steps += 1

    def facts(
        self, tracked: discover.Tracked, got_grad: Any, seen: Any
    ) -> tuple[list[EvalSpan], list[Any]]:
        """The spans (`seen`: an optimizer's steps), and each BatchNorm of the trained
        models whose running statistics are still their initial zeros and ones (one
        read-back for all of them)."""
        spans = [
            EvalSpan(
                self.names.get(root, "model"),
                index,
                s.first,
                s.last,
                s.steps,
                max(seen(index), s.steps),  # live steps: GradScaler's skips not counted
                s.dropouts,
                s.norms,
                s.where,
                self._beside(index, root),
                self.call_steps.get(root, -1) == 0,
                self.script_names.get(root),
            )
            for (index, root), s in self.spans.items()
            if s.dropouts or s.norms
        ]
        return spans, self._still(tracked, got_grad)

    def _beside(self, index: int, root: int) -> str | None:
        """Another model the optimizer trained in train mode: the script's name for it, or
        its class name."""
        others = [r for r in self.in_train.get(index, ()) if r != root]
        if not others:
            return None
        named = self.script_names.get(others[0])
        kind = self.names.get(others[0], "model")
        if named:
            return f"{named} ({kind})"
        return f"another {kind}" if kind == self.names.get(root) else kind

    def _still(self, tracked: discover.Tracked, got_grad: Any) -> list[StillStats]:
        models = {id(r): r for _, roots in self.roots_of.values() for r in roots}
        found = [
            (name, m)
            for root in models.values()
            for name, m in discover.unwrapped(root).named_modules()
            if isinstance(m, NORMS) and m.track_running_stats and m.running_mean is not None
        ]
        if not found:
            return []
        with torch.no_grad():
            flags = torch.stack([_initial(m) for _, m in found]).tolist()
        out = []
        for (name, m), still in zip(found, flags, strict=True):
            if not still:
                continue
            params = [p for p in (m.weight, m.bias) if p is not None]
            trained = any(id(p) in tracked.index and got_grad(tracked.index[id(p)]) for p in params)
            momentum = None if m.momentum is None else float(m.momentum)
            out.append(
                StillStats(
                    name.replace(discover.COMPILED_PREFIX, ""),
                    type(m).__name__,
                    momentum,
                    self.norm_eval.get(id(m), 0),
                    self.sampled,
                    trained,
                )
            )
        return out


def _initial(m: nn.Module) -> torch.Tensor:
    """A device bool: the BatchNorm's running mean is all 0 and its variance all 1."""
    mean, var = m.running_mean, m.running_var
    assert isinstance(mean, torch.Tensor) and isinstance(var, torch.Tensor)
    return torch.all(mean == 0) & torch.all(var == 1)


def in_eval(tracked: discover.Tracked, modes: Modes) -> frozenset[int] | None:
    """ids of the watched models in eval mode now (one host flag each); None before the
    first step found them (the step reads their mode then, less the models switched to
    eval after this backward: `Modes.evaled`)."""
    modes.evaled.clear()
    modes.known = frozenset(id(r) for r in tracked.roots)
    if not tracked.roots:
        return None
    return frozenset(id(r) for r in tracked.roots if not r.training)


def _roots(tracked: discover.Tracked, members: Any) -> list[nn.Module]:
    """The models that own at least one of the optimizer's parameters."""
    where = {tracked.owners[i][0] for i in members if i in tracked.owners}
    return [tracked.roots[w] for w in sorted(where) if w < len(tracked.roots)]


def _has_stats(m: nn.Module) -> bool:
    """A BatchNorm that keeps running statistics: one without (both set to None, as
    test-time adaptation's TENT does) normalises by the batch's in eval mode too."""
    return m.running_mean is not None or m.running_var is not None


def _switched(root: nn.Module, trained: set[int]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The model's dropouts (p > 0, beside a trained parameter that was in eval mode too)
    and BatchNorms (with a trained weight or bias, and running statistics) that are in eval
    mode: those that behave otherwise in train. A model switched back to train since its
    forward (train() before step()) had them all in eval then, as eval() sets every child.
    Trained modules in train mode inside a host in eval (adapters inserted into a frozen
    LM, Flamingo's gated cross-attention) mean the host's own dropouts were switched off on
    purpose, the host alone: those dropouts are not counted."""
    dropouts, norms = [], []
    model = discover.unwrapped(root)
    since_forward = root.training
    in_eval = _trained_in_eval(model, trained, since_forward)
    for name, parent in model.named_modules():
        own = any(id(p) in in_eval for p in parent.parameters())
        for child_name, m in parent.named_children():
            full = f"{name}.{child_name}" if name else child_name
            if m.training and not since_forward:
                continue
            if isinstance(m, DROPOUTS) and m.p > 0 and own:
                dropouts.append(f"{full} ({type(m).__name__})")
            elif (
                isinstance(m, NORMS)
                and _has_stats(m)
                and any(p is not None and id(p) in trained for p in (m.weight, m.bias))
            ):
                norms.append(f"{full} ({type(m).__name__})")
    return tuple(dropouts), tuple(norms)


def _trained_in_eval(model: nn.Module, trained: set[int], since_forward: bool) -> set[int]:
    """ids of the trained parameters whose own module ran its forward in eval mode."""
    return {
        id(p)
        for m in model.modules()
        if since_forward or not m.training
        for p in m.parameters(recurse=False)
        if id(p) in trained
    }
