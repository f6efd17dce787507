"""Frozen networks whose BatchNorms kept training their statistics: a perceptual loss's
feature network, a distillation teacher or a frozen backbone that the script fixed with
requires_grad_(False) but left in train mode, so each forward refolds the batch into its
running mean and variance and the "fixed" network drifts under the trained one.

A frozen network is a module whose every parameter has requires_grad False and none of
which an optimizer holds, with weights besides its norms' own (a BatchNorm frozen alone
inside a trained block is mmdetection's frozen affine, its statistics meant to follow the
trained convolutions). Read at the first optimizer step (one scan of the live modules) and
when the run ends: host version counters only (a train-mode forward bumps
`num_batches_tracked`; an EMA or a target network's load_state_dict bumps its weights').

The same scan says whether any fixed network is there at all: beside one, a trained tensor
that no layer holds is an input the script optimises (`optimised_input`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from gradscope.steps.state_facts import DriftedNorms
from gradscope.watcher import discover
from gradscope.watcher.modes import NORMS

MOST = 16
"""Frozen networks kept at most."""


@dataclass
class _Frozen:
    name: str
    network: nn.Module
    norms: list[tuple[str, nn.Module, int]]
    """(name inside the network, BatchNorm, its num_batches_tracked version then)."""
    weights: list[tuple[Any, int]]
    """(parameter, its version then)."""


@dataclass
class FrozenNorms:
    frozen: list[_Frozen] = field(default_factory=list)
    started_at: int | None = None
    """The optimizer step the frozen networks were found at."""
    fixed_network: bool = False
    """The script held a network with weights that nothing trains (every parameter
    requires_grad False, in no optimizer), BatchNorms or not: what an optimised input (a
    style-transfer image, a soft prompt) is fed to."""

    def start(self, step: int, walked: list[Any] | None = None) -> list[nn.Module]:
        """First optimizer step: keep the frozen networks with their norms' and weights'
        versions (one scan of the live modules and optimizers: the discovery's at the first
        backward, `walked`, where it made one); the live modules scanned, for the caller's
        other uses of the same scan (none at a later step)."""
        if self.started_at is not None:
            return []
        self.started_at = step
        try:
            return self._scan(walked or discover.live((nn.Module, torch.optim.Optimizer)))
        except Exception:  # a module that will not be looked into: no facts, no finding
            self.frozen = []
            self.fixed_network = False
            return []

    def _scan(self, found: list[Any]) -> list[nn.Module]:
        modules = [m for m in found if isinstance(m, nn.Module)]
        optimizers = [o for o in found if isinstance(o, torch.optim.Optimizer)]
        held = set(discover.optimizer_params(optimizers))
        children = {id(c) for m in modules for c in m.children()}
        named = discover.script_modules()
        for top in (m for m in modules if id(m) not in children):
            self.fixed_network = self.fixed_network or _holds_fixed(top, held)
            for name, network in _frozen_regions(top, held):
                top_name = named.get(id(top), type(top).__name__)
                label = f"{top_name}.{name}" if name else top_name
                self.frozen.append(_kept(label, network))
                if len(self.frozen) >= MOST:
                    return modules
        return modules

    def facts(self, steps: int) -> list[DriftedNorms]:
        """The frozen networks, still frozen and never written, whose BatchNorms ran
        training-mode forwards after the first step."""
        out = []
        for f in self.frozen:
            if any(p.requires_grad or p._version != v for p, v in f.weights):
                continue  # trained after all, or moved by hand (an EMA, a synced target)
            runs = {n: (_tracked(m) or v) - v for n, m, v in f.norms}
            drifted = tuple(n for n, k in runs.items() if k > 0)
            if drifted:
                forwards = max(runs.values())
                out.append(
                    DriftedNorms(
                        f.name,
                        type(f.network).__name__,
                        drifted,
                        forwards,
                        self.started_at or 1,
                        steps,
                    )
                )
        return out


def _frozen_regions(module: nn.Module, held: set[int], name: str = "") -> list[tuple[str, Any]]:
    """The outermost frozen networks inside `module` (itself included) holding a
    BatchNorm with running statistics."""
    if next(module.parameters(), None) is None:
        return []
    if not any(p.requires_grad or id(p) in held for p in module.parameters()):  # stops early
        norms = [m for m in module.modules() if isinstance(m, NORMS)]
        own = {id(p) for m in norms for p in m.parameters()}
        weights = any(id(p) not in own for p in module.parameters())
        return [(name, module)] if weights and any(_tracked(m) is not None for m in norms) else []
    out = []
    for child_name, child in module.named_children():
        full = f"{name}.{child_name}" if name else child_name
        out += _frozen_regions(child, held, full)
    return out


def _holds_fixed(module: nn.Module, held: set[int]) -> bool:
    """`module`, or a module inside it, has weights besides its norms' own and none that
    requires grad or that an optimizer holds: a network the script keeps fixed."""
    params = list(module.parameters())
    if not params:
        return False
    if not any(p.requires_grad or id(p) in held for p in params):
        norms = {id(p) for m in module.modules() if isinstance(m, NORMS) for p in m.parameters()}
        return any(id(p) not in norms for p in params)
    return any(_holds_fixed(child, held) for child in module.children())


def _kept(label: str, network: nn.Module) -> _Frozen:
    norms: list[tuple[str, nn.Module, int]] = [
        (n, m, _tracked(m) or 0)
        for n, m in network.named_modules()
        if isinstance(m, NORMS) and _tracked(m) is not None
    ]
    return _Frozen(label, network, norms, [(p, p._version) for p in network.parameters()])


def _tracked(m: nn.Module) -> int | None:
    """The version of the BatchNorm's batch counter (a train-mode forward adds 1 to it in
    place), None for one that keeps no statistics."""
    counter = getattr(m, "num_batches_tracked", None)
    if counter is None or not getattr(m, "track_running_stats", False):
        return None
    return int(counter._version)


def optimised_input(tracked: discover.Tracked, position: int, frozen: FrozenNorms) -> bool:
    """The tracked tensor at `position`, trained beside a fixed network, is held by no
    layer: by no model, or as a container's own parameter (a soft prompt registered on the
    wrapper around a frozen language model), not a Linear's, a Conv's or an Embedding's. It
    is an input the script optimises (a style-transfer or feature-visualisation image, a
    soft prompt, a latent): its initial values are data, not weights scaled to a layer. A
    tensor on a module that wraps a frozen layer transforming activations (a Linear or a
    Conv as `self.base`: a hand-written LoRA's A and B, DoRA's magnitude, (IA)^3's and
    VeRA's scaling vectors, prefix keys beside an attention's projections) is that layer's
    adapter weight, not an input; a soft prompt wraps a network or an input embedding."""
    if not frozen.fixed_network:
        return False
    if tracked.owners.get(position) is None:
        return True
    module = holder_of(tracked, position)
    if module is None:
        return False
    children = list(module.children())
    return bool(children) and not any(_frozen_layer(child) for child in children)


def holder_of(tracked: discover.Tracked, position: int) -> nn.Module | None:
    """The module that holds the tracked tensor at `position` as its own (None: no model
    holds it, or its name leads to none)."""
    owner = tracked.owners.get(position)
    if owner is None:
        return None
    where, name = owner
    holder, _, _ = name.replace(discover.COMPILED_PREFIX, "").rpartition(".")
    try:
        return discover.unwrapped(tracked.roots[where]).get_submodule(holder)
    except (AttributeError, IndexError):
        return None


def _frozen_layer(module: nn.Module) -> bool:
    """A layer (no modules inside, weights of its own, none trained) that maps activations
    to activations: not an Embedding, whose wrapper's own tensor (a soft prompt) sits in
    front of the tokens it looks up."""
    params = list(module.parameters())
    return (
        bool(params)
        and next(module.children(), None) is None
        and not isinstance(module, nn.Embedding)
        and not any(p.requires_grad for p in params)
    )
