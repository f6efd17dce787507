"""Routed experts that got no tokens in the batch (GS109), and the search for them that
GS101 and GS106 ask too: by design, not a cut graph.
"""

from __future__ import annotations

import weakref

from gradscope.config import Thresholds
from gradscope.findings import Finding, Rule, Severity
from gradscope.rules.params import ancestors, parent, trainable
from gradscope.rules.registry import DECLARED, Stage, rule
from gradscope.stats import ParamStats, RunStats


def idle_experts(stats: RunStats) -> dict[str, tuple[str, int, int]]:
    """Parameters of routed experts that got no tokens in this batch → (router module, idle
    experts, experts) of their mixture.

    An expert is one of >= 2 sibling modules of one container with the same class and the
    same parameter shapes, and the mixture has a router: a module that ran before the first
    expert that ran, next to the container (at most two levels below the container's parent,
    not inside an expert), owning a parameter with one dimension per expert (the gate's
    logits). An expert is idle when it never ran, or ran on no tokens (an all-zero gradient),
    while a sibling got tokens: routing by design. Without such a router (a ModuleList of
    layers one of which is skipped) nothing is excused.

    Linear in modules and parameters (times the nesting depth): each group of alike siblings
    is judged once, whatever number of its members are idle; and once per pass, for the
    three rules that ask."""
    last = _LAST_IDLE[0]
    if last is not None and last[0]() is stats:
        return last[1]
    found = _idle_experts(stats)
    _LAST_IDLE[0] = (weakref.ref(stats), found)
    return found


_LAST_IDLE: list[tuple[weakref.ref[RunStats], dict[str, tuple[str, int, int]]] | None] = [None]
"""The last pass's idle experts, held only while that pass's stats live."""


def _idle_experts(stats: RunStats) -> dict[str, tuple[str, int, int]]:
    ran = {m.name for m in stats.modules if m.ran}
    idle = [
        p
        for p in trainable(stats)
        if (not p.has_grad and p.module not in ran)
        or (p.has_grad and p.grad_max == 0 and p.numel > 0)
    ]
    if not idle:
        return {}
    mixtures = _Mixtures(stats)
    out = {}
    for p in idle:
        for expert in ancestors(p.module):  # the expert may be an ancestor of its own module
            found = mixtures.of(expert) if expert else None
            if found is not None:
                out[p.name] = found
                break
    return out


Signature = tuple[str, tuple[tuple[str, tuple[int, ...]], ...]]


class _Mixtures:
    """Experts and routers found from module names, classes, order and parameter shapes."""

    def __init__(self, stats: RunStats):
        self.modules = {m.name: m for m in stats.modules}
        self.children: dict[str, list[str]] = {}
        for name in self.modules:
            if name:
                self.children.setdefault(parent(name), []).append(name)
        self.under: dict[str, list[ParamStats]] = {}
        """Module name → the parameters of its subtree, in registration order."""
        for p in stats.params:
            for owner in ancestors(p.module):
                self.under.setdefault(owner, []).append(p)
        self.signatures: dict[str, Signature] = {}
        self.groups: dict[tuple[str, Signature], tuple[set[str], tuple[str, int, int] | None]] = {}
        self.found: dict[str, tuple[str, int, int] | None] = {}

    def signature(self, name: str) -> Signature:
        if name not in self.signatures:
            cut = len(name) + 1
            shapes = tuple((p.name[cut:], p.shape) for p in self.under.get(name, ()))
            self.signatures[name] = (self.modules[name].kind, shapes)
        return self.signatures[name]

    def got_tokens(self, name: str) -> bool:
        params = [p for p in self.under.get(name, ()) if p.requires_grad]
        return bool(params) and all(p.has_grad and p.grad_max != 0 for p in params)

    def of(self, expert: str) -> tuple[str, int, int] | None:
        """(router, idle, experts) if `expert` is an idle routed expert of a mixture."""
        if expert not in self.found:
            self.found[expert] = self._find(expert) if expert in self.modules else None
        return self.found[expert]

    def _find(self, expert: str) -> tuple[str, int, int] | None:
        container = parent(expert)
        mine = self.signature(expert)
        if not mine[1]:
            return None
        key = (container, mine)
        if key not in self.groups:
            self.groups[key] = self._group(container, mine)
        busy, found = self.groups[key]
        return None if expert in busy else found

    def _group(
        self, container: str, mine: Signature
    ) -> tuple[set[str], tuple[str, int, int] | None]:
        """The busy experts of the siblings alike `mine`, and the mixture's (router, idle,
        experts) if they have a router and at least one of them is busy."""
        experts = [c for c in self.children.get(container, []) if self.signature(c) == mine]
        busy = {e for e in experts if self.got_tokens(e)}
        if len(experts) < 2 or not busy:
            return busy, None
        orders = [self.modules[e].order for e in busy]
        first = min(o for o in orders if o is not None) if None not in orders else None
        n, members = len(experts), set(experts)
        scope = parent(container) if container else container
        for p in self.under.get(scope, ()):
            router = self.modules.get(p.module)
            if router is None or not router.ran or n not in p.shape:
                continue
            below = p.module[len(scope) + 1 :] if scope else p.module
            if (
                below.count(".") <= 1
                and members.isdisjoint(ancestors(p.module))
                and (first is None or router.order is None or router.order < first)
            ):
                return busy, (p.module or "<root>", n - len(busy), n)
        return busy, None


@rule(
    "GS109",
    "idle-expert",
    Severity.INFO,
    "none-grad",
    Stage.RUN,
    "a routed expert of a mixture got no tokens in the batch (no or an all-zero gradient)",
    example="a mixture-of-experts layer with top-2 routing on a small batch",
    fix=(
        "nothing if the experts balance out over batches; if the same experts stay idle, add a "
        "load-balancing loss or router noise, or check the router's init"
    ),
)
def idle_expert(stats: RunStats, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """A parameter of a routed expert got no gradient (None or all zero) while a sibling expert
    got tokens. An expert is one of two or more sibling modules with the same class and parameter
    shapes, next to a router: a module that ran before them and owns a parameter with one
    dimension per expert. Routing by design, so information, not a GS101 error."""
    found = idle_experts(stats)
    by_name = {p.name: p for p in stats.params}
    out = []
    for name, (router, idle, n) in found.items():
        p = by_name[name]
        what = "is None" if not p.has_grad else "is all zeros"
        out.append(
            this.finding(
                name,
                f"grad of {name} {what}: its expert got no tokens from the router `{router}` in "
                f"this batch ({idle} of {n} experts idle); routing by design, not a cut graph",
                "nothing to do if the experts balance out over batches; if the same experts stay "
                "idle, add a load-balancing loss or router noise, or check the router's init",
                float(idle),
            )
        )
    return out
