"""Routed experts in a watched run (a mixture-of-experts layer: Switch, Mixtral), found from
parameter names and shapes alone, for the rules that judge a parameter without gradients
(GS413, GS417): an expert that gets no token has none by design of the routing, and one
that gets none from some step to the end is a dead expert, not a cut graph. No torch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gradscope.findings import Finding
from gradscope.rules.params import parent
from gradscope.steps.records import WatchRun
from gradscope.steps.tensor_track import Learned

MIN_EXPERTS = 3
"""Fewer alike siblings are a pair of layers as often as a mixture (a binary head beside
two blocks would pass for a router)."""


@dataclass(frozen=True)
class Mixture:
    """One mixture-of-experts layer: its experts' container, their names, its router."""

    container: str
    """The module whose children are the experts (`moe.experts`)."""
    experts: tuple[str, ...]
    """The experts' module names, in registration order."""
    router: str
    """The gate's parameter: one row (or column) of logits per expert."""


@dataclass(frozen=True)
class Routed:
    """Where one parameter sits in a mixture."""

    mixture: Mixture
    expert: str | None
    """Its expert's module name; None for the router's own parameter."""


def routed(run: WatchRun) -> dict[int, Routed]:
    """Parameter position → its place in a mixture, for the experts' parameters and the
    routers'. Experts are >= MIN_EXPERTS children of one container with the same parameter
    names and shapes below them; the mixture's router is a parameter outside the container,
    below the container's parent module (at most two levels: `moe.gate.weight`,
    `mlp.router.classifier.weight`), with a first or last dimension of one entry per expert
    (the gate's logits). The parent must be a module of its own (not the model's root):
    a router sits beside its experts in their layer. A ModuleList of blocks has no such
    parameter beside it, and is no mixture."""
    names = {i: p.name for i, p in enumerate(run.params) if p.in_model}
    found: dict[int, Routed] = {}
    for mixture in _mixtures(run, names):
        for i, name in names.items():
            if name == mixture.router:
                found[i] = Routed(mixture, None)
                continue
            expert = next((e for e in mixture.experts if name.startswith(e + ".")), None)
            if expert is not None:
                found[i] = Routed(mixture, expert)
    return found


def _mixtures(run: WatchRun, names: dict[int, str]) -> list[Mixture]:
    """Every container of alike children with a router beside it."""
    children: dict[str, dict[str, set[tuple[str, tuple[int, ...]]]]] = {}
    for i, name in names.items():
        parts = name.split(".")
        for depth in range(1, len(parts) - 1):
            container = ".".join(parts[:depth])
            child = ".".join(parts[: depth + 1])
            rest = ".".join(parts[depth + 1 :])
            children.setdefault(container, {}).setdefault(child, set()).add(
                (rest, run.params[i].shape)
            )
    out = []
    for container, kids in children.items():
        experts = _alike(kids)
        if len(experts) < MIN_EXPERTS or "." not in container:
            continue
        stack = _stack_of(children, container)
        beside = {i: n for i, n in names.items() if not any(n.startswith(b + ".") for b in stack)}
        router = _router(run, beside, container, len(experts))
        if router is not None:
            out.append(Mixture(container, tuple(experts), router))
    return out


def _stack_of(
    children: dict[str, dict[str, set[tuple[str, tuple[int, ...]]]]], container: str
) -> list[str]:
    """The container's siblings with its own parameter names and shapes: the other blocks
    of the stack it is one layer of (`blocks.0` beside `blocks.1`). A gate sits beside its
    experts in their own layer, never inside another block: a block's q, k, v and o with
    rank-4 LoRA factors beside them in the next block are no mixture of 4 experts."""
    layer = children.get(parent(container), {})
    own = layer.get(container)
    return [s for s, signature in layer.items() if s != container and signature == own]


def _alike(kids: dict[str, set[tuple[str, tuple[int, ...]]]]) -> list[str]:
    """The largest group of children with the same parameter names and shapes."""
    groups: dict[frozenset[tuple[str, tuple[int, ...]]], list[str]] = {}
    for child, signature in kids.items():
        groups.setdefault(frozenset(signature), []).append(child)
    return max(groups.values(), key=len, default=[])


def _router(run: WatchRun, names: dict[int, str], container: str, experts: int) -> str | None:
    """The first parameter beside the container with one logit per expert (a noisy gate's
    w_gate, registered before its w_noise)."""
    layer = parent(container)
    fits = []
    for i, name in names.items():
        if name.startswith(container + ".") or not name.startswith(layer + "."):
            continue
        below = name[len(layer) + 1 :].count(".")
        shape = run.params[i].shape
        if below <= 2 and shape and experts in (shape[0], shape[-1]):
            fits.append(name)
    return fits[0] if fits else None


def siblings_learning(run: WatchRun, place: Routed, optimizer: int, after: int) -> int:
    """How many other experts of the mixture had a gradient at a live step past `after`
    (0-based among the optimizer's live steps): the router still sent them tokens."""
    last: dict[str, int] = {}
    for i, p in enumerate(run.params):
        expert = next((e for e in place.mixture.experts if p.name.startswith(e + ".")), None)
        if expert is None or expert == place.expert:
            continue
        had = run.tensors.learned(optimizer, i)
        if had is not None:
            last[expert] = max(last.get(expert, -1), had.last)
    return sum(1 for x in last.values() if x > after)


def if_dead_expert(
    run: WatchRun, optimizer: int, i: int, had: Learned, finding: Finding, places: dict[int, Routed]
) -> Finding:
    """GS417 on a routed expert that stopped while its siblings went on: the router
    stopped choosing it; any other parameter's finding is returned as it is."""
    place = places.get(i)
    if place is None or place.expert is None or not run.params[i].requires_grad:
        return finding
    siblings = siblings_learning(run, place, optimizer, had.last)
    if not siblings:
        return finding
    head = f"{run.params[i].name} stopped learning at step {had.since_step}"
    return as_dead_expert(finding, place, head, siblings)


def if_unrouted(run: WatchRun, place: Routed, finding: Finding, head: str) -> Finding:
    """GS413 on a mixture's parameter: a router that never got a gradient, or an expert
    that never got a token while its siblings did."""
    if place.expert is None:
        return as_untrained_router(finding, place)
    siblings = {
        e
        for e in place.mixture.experts
        for i, p in enumerate(run.params)
        if e != place.expert and p.name.startswith(e + ".") and run.tensors.got_grad(i)
    }
    return as_dead_expert(finding, place, head, len(siblings)) if siblings else finding


def as_dead_expert(finding: Finding, place: Routed, head: str, siblings: int) -> Finding:
    """GS413 or GS417 on an expert whose siblings got tokens while it got none: the router
    stopped choosing it (routing collapse), which no detach() or freeze explains."""
    m = place.mixture
    return replace(
        finding,
        message=f"{head}: its expert {place.expert} got no token from the router "
        f"({m.router}) while {siblings} of the {len(m.experts)} experts of {m.container} "
        "did: a dead expert, the router collapsed onto the others",
        advice="add the load-balancing loss to the loss backward() reads (Switch: "
        "0.01 × E·Σ f_i·P_i, with the router's probabilities P_i not detached), a router "
        "z-loss or input jitter, or raise the capacity factor; an expert that stays dead "
        "can be re-initialised",
    )


def as_untrained_router(finding: Finding, place: Routed) -> Finding:
    """GS413 on a router's gate: no gradient reaches the routing, so it never learns."""
    m = place.mixture
    return replace(
        finding,
        message=f"{finding.message}; it is the router of the {len(m.experts)} experts of "
        f"{m.container}, so the routing stays as initialised: the gate's logits reach the "
        "loss only through their top-k indices or were detached",
        advice="weigh each chosen expert's output by the router's probabilities (the softmax "
        "of its logits, not detached) and compute the load-balancing loss on them",
    )
