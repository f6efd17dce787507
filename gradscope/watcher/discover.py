"""Find what the script trains: its optimizers, the modules that own their parameters, names.

Nothing in the script is changed or wrapped for this: one scan of the live objects
(`gc.get_objects`, and where the script froze its objects what its frames hold) at the
first backward, again at a clip or an optimizer's first step
only when they hold a tensor no scan has placed in a model (`covered`). Hooks on every
module call would do it too, but would add work to every forward and, under
torch.compile, a guard that recompiles when they are removed.
"""

from __future__ import annotations

import gc
import sys
import sysconfig
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from gradscope.autograd_walk import backward_nodes
from gradscope.watcher import held_models, plain_attributes, store_names

COMPILED_PREFIX = "_orig_mod."


@dataclass
class Tracked:
    """The parameters gradscope measures, in a fixed order (new ones are appended)."""

    params: list[torch.Tensor] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    index: dict[int, int] = field(default_factory=dict)
    """id(param) → position."""
    roots: list[nn.Module] = field(default_factory=list)
    """The models found so far, in order: a second one prefixes every name (the first
    one's too) with its class name."""
    owners: dict[int, tuple[int, str]] = field(default_factory=dict)
    """position → (index in roots, name inside that model)."""
    attributes: set[int] = field(default_factory=set)
    """Positions of leaf tensors a model keeps as plain attributes, not nn.Parameters."""
    walked: list[Any] = field(default_factory=list)
    """The live modules and optimizers of the last walk of every object, held until the
    first optimizer step reads them (frozen_norms.py): one walk for both."""

    def members(self, optimizer: Any) -> tuple[int, ...]:
        """Positions of the tracked parameters `optimizer` steps, in its param groups' order."""
        index = self.index
        return tuple(
            index[id(p)] for g in optimizer.param_groups for p in g["params"] if id(p) in index
        )

    def add(self, name: str, param: torch.Tensor) -> None:
        if id(param) in self.index:
            return
        self.index[id(param)] = len(self.params)
        self.params.append(param)
        self.names.append(name)

    def add_model(self, root: nn.Module, name: str, param: torch.Tensor) -> None:
        if id(param) in self.index:
            return
        where = next((i for i, r in enumerate(self.roots) if r is root), len(self.roots))
        self.owners[len(self.params)] = (where, name)
        self.add(name, param)
        if where == len(self.roots):  # a new model: every name may take a prefix
            self.roots.append(root)
            self.rename()
        else:
            self.names[-1] = _prefixes(self.roots)[where] + name

    def rename(self) -> None:
        prefixes = _prefixes(self.roots)
        for position, (where, name) in self.owners.items():
            self.names[position] = prefixes[where] + name


def live_optimizers() -> list[torch.optim.Optimizer]:
    return live(torch.optim.Optimizer)


def live(
    kind: type | tuple[type, ...], enough: Callable[[list[Any]], bool] = lambda found: False
) -> list[Any]:
    """The live instances of `kind`: the collector's objects, and where the script froze
    some (`gc.freeze()`, which takes them out of `gc.get_objects`) and those are not
    `enough`, the ones reachable from the running frames' variables (`reachable`)."""
    found = [o for o in gc.get_objects() if issubclass(type(o), kind)]
    if not enough(found) and gc.get_freeze_count():  # (a count that walks the frozen)
        known = {id(o) for o in found}
        found += [o for o in reachable(kind) if id(o) not in known]
    return found


REACH_LIMIT = 10_000
"""Objects `reachable` visits at most."""


def reachable(kind: type | tuple[type, ...], depth: int = 4) -> list[Any]:
    """Instances of `kind` among the variables of the calling thread's frames of the
    user's code (a library's or gradscope's apart: the script's own frames hold what it
    trains, or the trainer that does), their containers' items and their objects'
    attributes, `depth` levels down (a model held by a trainer held by a local); never
    inside a Python module or an instance of `kind`. Run only where objects are frozen."""
    level: list[Any] = []
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None:
        if _users(frame.f_code.co_filename):
            level += [frame.f_locals, frame.f_globals]
        frame = frame.f_back
    seen: set[int] = set()
    found: list[Any] = []
    for _ in range(depth + 1):
        below: list[Any] = []
        for value in level:
            if id(value) in seen or len(seen) >= REACH_LIMIT:
                continue
            seen.add(id(value))
            try:
                if isinstance(value, kind):
                    found.append(value)
                else:
                    below += _inside(value)
            except Exception:  # an object that will not be looked into (a proxy, a race)
                continue
        level = below
    return found


def _inside(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return list(value.values())
    if isinstance(value, (list, tuple, set, frozenset)):
        return list(value)
    if isinstance(value, (type, types.ModuleType, torch.Tensor)):
        return []
    return list(getattr(value, "__dict__", {}).values())


_LIBRARIES = tuple(
    {sysconfig.get_paths()[k] for k in ("stdlib", "purelib", "platlib")}
    | {str(Path(__file__).parents[1])}
)


def _users(filename: str) -> bool:
    """A frame of the user's code: a file, not the standard library's, an installed
    package's or gradscope's (nor code given as a string: a test runner's worker)."""
    return not filename.startswith(_LIBRARIES) and not filename.startswith("<")


MAX_GRAPH_NODES = 4096
"""Autograd nodes `graph_leaves` visits at most. Each node it reaches keeps a Python
object until the graph is freed, and a graph whose nodes have them is freed by
recursion, not by torch's own loop: a walk of every node of a chain of 100,000 (a long
recurrent loop) made its release overflow the C stack (about 200 bytes a node). 4096
is under 1 MiB, and reaches a leaf of every layer of a usual model; a module found
there brings all of its parameters (`extend`)."""


def graph_leaves(roots: Sequence[torch.Tensor], limit: int = MAX_GRAPH_NODES) -> list[torch.Tensor]:
    """The leaf tensors a backward from `roots` accumulates gradients into (its autograd
    graph's AccumulateGrad nodes) among its first `limit` nodes, depth first (a leaf is
    soon reached): what the script trains when no optimizer says so."""
    out: list[torch.Tensor] = []
    for node in backward_nodes(roots, limit=limit):
        variable = getattr(node, "variable", None)
        if isinstance(variable, torch.Tensor):
            out.append(variable)
    return out


def optimizer_params(optimizers: list[torch.optim.Optimizer]) -> dict[int, torch.Tensor]:
    return {id(p): p for o in optimizers for g in o.param_groups for p in g["params"]}


def root_modules(
    owned: dict[int, torch.Tensor],
    known: Sequence[nn.Module] = (),
    walked: list[Any] | None = None,
) -> list[nn.Module]:
    """The outermost live modules that own at least one optimizer parameter, in the order
    of their first parameter in `owned` (the optimizers' own order): the garbage
    collector's order changes from run to run, and with it which of two models of one
    class would be named `Sequential` and which `Sequential2`. A module no live optimizer
    holds comes after those one does (`_outside`). Where models are `known` already, the
    young ones are looked at first (`_young`)."""
    young = _young(owned, known) if known else None
    stepped: set[int] = set()
    if young:
        modules = young
    else:  # the walk's optimizers kept too, for the first step's frozen networks
        found = live((nn.Module, torch.optim.Optimizer), lambda f: _own_all(_modules(f), owned))
        modules = _modules(found)
        stepped = {id(p) for o in found if isinstance(o, torch.optim.Optimizer) for p in _held(o)}
        if walked is not None:
            walked[:] = found
    children = {id(c) for m in modules for c in m.children()}
    position = {k: i for i, k in enumerate(owned)}
    first = {
        id(m): min((position[id(p)] for p in m.parameters() if id(p) in position), default=-1)
        for m in modules
        if id(m) not in children
    }
    roots = [m for m in modules if first.get(id(m), -1) >= 0]
    roots.sort(key=lambda m: (_outside(m, stepped), first[id(m)]))
    return [held_models.held_inside(m, owned, _users) for m in roots]


def _held(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    return [p for g in optimizer.param_groups for p in g["params"]]


def _outside(module: nn.Module, stepped: set[int]) -> bool:
    """Whether no live optimizer holds any of `module`'s tensors while some optimizer
    holds some: found at the first backward, before any step, in the graph's order, a
    target network or a teacher would take the class's plain name and the network
    trained beside it the numbered one."""
    return bool(stepped) and not any(id(p) in stepped for p in module.parameters())


def _young(owned: dict[int, torch.Tensor], known: Sequence[nn.Module]) -> list[nn.Module] | None:
    """The modules in the collector's young generations, where they own every tensor of
    `owned` and none that owns one lies inside a model found before: a model made since
    the last scans (a task's clone in a meta-learning loop, a federated client's copy, each
    with an optimizer of its own) is found without walking every live object (tens of
    milliseconds, once per new optimizer: most of a Reptile run's time). None: walk them
    all."""
    found = [o for g in (0, 1) for o in gc.get_objects(g) if isinstance(o, nn.Module)]
    if not found or not _own_all(found, owned):
        return None
    inside = {id(m) for root in known for m in root.modules()}
    owners = [m for m in found if any(id(p) in owned for p in m.parameters())]
    return None if any(id(m) in inside for m in owners) else found


def _modules(found: list[Any]) -> list[nn.Module]:
    return [m for m in found if isinstance(m, nn.Module)]


def _own_all(modules: list[nn.Module], owned: dict[int, torch.Tensor]) -> bool:
    """Every tensor of `owned` is a parameter of one of `modules`."""
    held = {id(p) for m in modules for p in m.parameters(recurse=False)}
    return all(k in held for k in owned)


def covered(
    tracked: Tracked, optimizers: Sequence[Any], extra: Sequence[torch.Tensor] = ()
) -> bool:
    """Every parameter these optimizers step (and every one of `extra`) is already tracked
    as part of a model an earlier scan found (the first backward's): their first step needs
    no scan of its own, which walks every live object (tens of milliseconds in a large
    process)."""
    index, owners = tracked.index, tracked.owners
    params = [*optimizer_params(list(optimizers)).values(), *extra]
    return all(index.get(id(p), -1) in owners for p in params)


def extend(
    tracked: Tracked,
    optimizers: list[torch.optim.Optimizer],
    extra: Sequence[torch.Tensor] = (),
    extra_name: str = "clipped.param",
) -> None:
    """Add the parameters of the modules that own these optimizers' (or `extra`)
    parameters not tracked yet, named; then the optimizers' stray ones."""
    owned = {k: p for k, p in optimizer_params(optimizers).items() if k not in tracked.index}
    owned.update((id(p), p) for p in extra)
    add_models(tracked, owned)
    named = {**store_names.store_names(), **_script_names()}  # a tensor no model holds
    for i, o in enumerate(optimizers):
        for g, group in enumerate(o.param_groups):
            for k, p in enumerate(group["params"]):
                tracked.add(named.get(id(p), f"optimizer{i}.group{g}.param{k}"), p)
    kept = plain_attributes.held_by(tracked.roots, extra) if extra else {}
    for k, p in enumerate(extra):
        if id(p) in kept and id(p) not in tracked.index:
            tracked.attributes.add(len(tracked.params))
        tracked.add(kept.get(id(p)) or named.get(id(p), f"{extra_name}{k}"), p)


def add_models(tracked: Tracked, owned: dict[int, torch.Tensor]) -> None:
    """Track the parameters of the modules that own these tensors (id → tensor), named."""
    for root in root_modules(owned, tracked.roots, tracked.walked):
        for name, param in unwrapped(root).named_parameters():
            if param.requires_grad or id(param) in owned:
                tracked.add_model(root, strip(name), param)


def add_idle(tracked: Tracked, optimizers: Sequence[Any]) -> None:
    """Track the models of optimizers whose zero_grad() ran and whose step() has not: the
    gradients their backward gives are measured, so that a step() the script forgot is
    named (a synthetic-gradient module whose optimizer never steps) wherever the module
    lies outside every stepped optimizer's models."""
    owned = {k: p for k, p in optimizer_params(list(optimizers)).items() if k not in tracked.index}
    if owned:
        add_models(tracked, owned)


def unstepped_holders(params: Sequence[torch.Tensor], placed: set[int]) -> dict[int, str]:
    """id → the class of a live optimizer holding it, for the trainable tensors outside
    `placed` (those of the optimizers that stepped or were zeroed): in a run that ended
    early, an optimizer whose turn never came (the next block's, in layer-wise training).
    One scan of the live objects, only where such a tensor exists."""
    loose = {id(p) for p in params if p.requires_grad and id(p) not in placed}
    if not loose:
        return {}
    return {
        id(q): type(o).__name__
        for o in live_optimizers()
        for g in o.param_groups
        for q in g["params"]
        if id(q) in loose
    }


def _script_names() -> dict[int, str]:
    """id → name of the tensors the running script binds at module level (`w`, `b` of a
    loop without nn.Module)."""
    main = sys.modules.get("__main__")
    names = getattr(main, "__dict__", {})
    return {
        id(v): k for k, v in list(names.items()) if isinstance(v, torch.Tensor) and k[:1] != "_"
    }


def script_modules() -> dict[int, str]:
    """id → the name the running script binds a module to at module level (`vgg`)."""
    main = sys.modules.get("__main__")
    names = getattr(main, "__dict__", {})
    return {id(v): k for k, v in list(names.items()) if isinstance(v, nn.Module) and k[:1] != "_"}


WRAPPERS = ("DistributedDataParallel", "DataParallel")
"""Modules that hold the user's model as `.module`: names are the model's own, as the
distributed findings and the user's config spell them (no `module.` prefix)."""


def unwrapped(module: nn.Module) -> nn.Module:
    while type(module).__name__ in WRAPPERS and isinstance(
        getattr(module, "module", None), nn.Module
    ):
        module = module.module  # type: ignore[assignment]
    return module


def strip(name: str) -> str:
    return name.replace(COMPILED_PREFIX, "")


def _prefixes(roots: list[nn.Module]) -> list[str]:
    """No prefix for one model; class names for several (a GAN's generator and critic)."""
    if len(roots) == 1:
        return [""]
    out, seen = [], set()
    for m in roots:
        base = type(getattr(m, "_orig_mod", m)).__name__
        name, n = base, 1
        while name in seen:
            n += 1
            name = f"{base}{n}"
        seen.add(name)
        out.append(name + ".")
    return out


def read_out_layers(roots: Sequence[nn.Module]) -> dict[tuple[int, str], str]:
    """(model index, parameter name in it) → the name of the layer before its own, in their
    parent, that carries a forward hook: a wrapper (BYOL, a feature extractor) reads that
    layer's output, so what comes after it may be computed for nothing by design."""
    out: dict[tuple[int, str], str] = {}
    for k, root in enumerate(roots):
        for parent_name, parent in root.named_modules():
            children = list(parent.named_children())
            hooked = next((j for j, (_, c) in enumerate(children) if _reads_output(c)), None)
            if hooked is None:
                continue
            prefix = f"{parent_name}." if parent_name else ""
            layer = prefix + children[hooked][0]
            for name, child in children[hooked + 1 :]:
                for pname, _ in child.named_parameters():
                    out.setdefault((k, f"{prefix}{name}.{pname}"), layer)
    return out


MARKING_HOOKS = frozenset({"make_inputs_require_grads"})
"""Forward hooks that mark a layer's output and read nothing of it: transformers'
enable_input_require_grads (`output.requires_grad_(True)` on the input embeddings), which
trl's and peft's trainers install under gradient checkpointing or adapters."""


def _reads_output(module: nn.Module) -> bool:
    """The module carries a forward hook other than one that only marks its output."""
    hooks = module._forward_hooks.values()
    return any(getattr(h, "__name__", "") not in MARKING_HOOKS for h in hooks)
