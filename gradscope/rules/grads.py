"""Per-run rules on gradients: None, non-finite, exploding, vanishing, zero, frozen.

Each is a pure function `(stats, thresholds) -> list[Finding]`, registered with
its rule id (declared in gradscope/findings.py) by `@check`.
"""

from __future__ import annotations

import statistics
import weakref
from collections.abc import Iterable, Iterator

from gradscope.config import Thresholds
from gradscope.findings import RULES, Finding
from gradscope.fmt import num
from gradscope.rules import depth
from gradscope.rules.base import check
from gradscope.stats import ParamStats, RunStats


def _trainable(stats: RunStats) -> list[ParamStats]:
    return [p for p in stats.params if p.requires_grad]


def _live(stats: RunStats) -> list[ParamStats]:
    """Parameters with a finite, non-zero gradient: the ones norms can be compared over.

    (grad_max is None where the probe did not measure it: the gradient is then known to be
    non-zero and finite from its norm.)"""
    return [p for p in stats.params if p.has_grad and p.finite and p.grad_max != 0]


def dense_rms(p: ParamStats) -> float:
    """RMS over the non-zero elements, so sparse (embedding) gradients compare fairly."""
    nonzero = p.numel * (1.0 - (p.zero_fraction or 0.0))
    return (p.grad_norm or 0.0) / max(nonzero, 1.0) ** 0.5


# --- experts a router sent no tokens to ---------------------------------------------------------


def _parent(name: str) -> str:
    return name.rpartition(".")[0]


def _ancestors(module: str) -> Iterator[str]:
    """`module`, its parent, ... up to the root ("")."""
    while module:
        yield module
        module = _parent(module)
    yield ""


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
        for p in _trainable(stats)
        if (not p.has_grad and p.module not in ran)
        or (p.has_grad and p.grad_max == 0 and p.numel > 0)
    ]
    if not idle:
        return {}
    mixtures = _Mixtures(stats)
    out = {}
    for p in idle:
        for expert in _ancestors(p.module):  # the expert may be an ancestor of its own module
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
                self.children.setdefault(_parent(name), []).append(name)
        self.under: dict[str, list[ParamStats]] = {}
        """Module name → the parameters of its subtree, in registration order."""
        for p in stats.params:
            for owner in _ancestors(p.module):
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
        container = _parent(expert)
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
        scope = _parent(container) if container else container
        for p in self.under.get(scope, ()):
            router = self.modules.get(p.module)
            if router is None or not router.ran or n not in p.shape:
                continue
            below = p.module[len(scope) + 1 :] if scope else p.module
            if (
                below.count(".") <= 1
                and members.isdisjoint(_ancestors(p.module))
                and (first is None or router.order is None or router.order < first)
            ):
                return busy, (p.module or "<root>", n - len(busy), n)
        return busy, None


@check("GS109")
def idle_expert(stats: RunStats, t: Thresholds) -> list[Finding]:
    found = idle_experts(stats)
    by_name = {p.name: p for p in stats.params}
    out = []
    for name, (router, idle, n) in found.items():
        p = by_name[name]
        what = "is None" if not p.has_grad else "is all zeros"
        out.append(
            RULES["GS109"].finding(
                name,
                f"grad of {name} {what}: its expert got no tokens from the router `{router}` in "
                f"this batch ({idle} of {n} experts idle); routing by design, not a cut graph",
                "nothing to do if the experts balance out over batches; if the same experts stay "
                "idle, add a load-balancing loss or router noise, or check the router's init",
                float(idle),
            )
        )
    return out


@check("GS101")
def none_grad(stats: RunStats, t: Thresholds) -> list[Finding]:
    ran = {m.name for m in stats.modules if m.ran}
    routed = idle_experts(stats)
    out = []
    for p in _trainable(stats):
        if p.has_grad or p.name in routed:
            continue
        if not stats.loss_requires_grad:
            why = "the loss itself does not require grad, so no parameter is in its graph"
            advice = (
                "look for torch.no_grad(), .detach(), .item() or a numpy round-trip "
                "before the loss is computed"
            )
        elif p.module not in ran:
            why = f"its module `{p.module or '<root>'}` never ran in the forward pass"
            advice = (
                "call the module in forward, delete it, or freeze it with "
                "requires_grad_(False) if it is unused on purpose"
            )
        else:
            why = (
                f"its module `{p.module or '<root>'}` ran, but its output does not reach "
                "the loss: the graph is cut after it"
            )
            advice = (
                "find the .detach(), .data, torch.no_grad() or non-torch round-trip "
                "between the module and the loss"
            )
        out.append(RULES["GS101"].finding(p.name, f"grad of {p.name} is None: {why}", advice))
    return out


@check("GS102")
def non_finite_loss(stats: RunStats, t: Thresholds) -> list[Finding]:
    if stats.loss_finite:
        return []
    return [
        RULES["GS102"].finding(
            "loss",
            f"the loss ({stats.loss_source}) is {num(stats.loss_value)}",
            "find the op that first produces a non-finite value (log/sqrt/div of zero, overflow in "
            "float16) and guard it with a clamp or an epsilon",
            stats.loss_value,
        )
    ]


@check("GS103")
def non_finite_grad(stats: RunStats, t: Thresholds) -> list[Finding]:
    where = "the loss is non-finite too" if not stats.loss_finite else "although the loss is finite"
    return [
        RULES["GS103"].finding(
            p.name,
            f"grad of {p.name} holds NaN/Inf (max |grad| = {num(p.grad_max)}); {where}",
            "a backward formula divides by zero or overflows (sqrt/log/pow near 0, x/x, masked "
            "infinities); guard the forward op or clip gradients",
            p.grad_max,
        )
        for p in stats.params
        if p.has_grad and not p.finite
    ]


# --- scales set by design --------------------------------------------------------------------
#
# Three designs make gradients tiny, zero or lopsided on purpose; judging them against the
# rest of the model is what made healthy ConvNeXt, ViT and ResNet models look broken.

LAYER_SCALE_RMS = 1e-3
"""A trainable tensor with non-zero weights this small (per element) scales a residual branch:
ConvNeXt/CaiT `gamma`, BEiT `lambda` (initialised to 1e-6..1e-4)."""
THEORY_ZERO = 1e-4
"""A bias whose gradient RMS is this far below its own module's weight gradient is zero up to
rounding (softmax shift invariance for an attention key bias; BatchNorm removing a bias)."""


def _wrms(p: ParamStats) -> float:
    return p.weight_norm / max(p.numel, 1) ** 0.5


def _zero_init(p: ParamStats) -> bool:
    return p.requires_grad and p.weight_norm == 0 and p.numel > 0


def layer_scaled(stats: RunStats) -> dict[str, str]:
    """Parameter name → the layer-scale tensor whose branch it lives in."""
    scales = [
        p
        for p in stats.params
        if p.requires_grad and 0 < _wrms(p) < LAYER_SCALE_RMS and p.numel > 1
    ]
    by_module: dict[str, list[tuple[int, ParamStats]]] = {}  # its first two, in order
    for i, scale in enumerate(scales):
        if len(kept := by_module.setdefault(scale.module, [])) < 2:
            kept.append((i, scale))
    out: dict[str, str] = {}
    if not by_module:
        return out
    for p in stats.params:  # the first scale tensor, other than p, of a module above p
        owners = [
            next(o for o in by_module[m] if o[1] is not p)
            for m in _ancestors(p.module)
            if m in by_module and any(s is not p for _, s in by_module[m])
        ]
        if owners:
            out[p.name] = min(owners, key=lambda o: o[0])[1].name
    return out


def theory_zero(stats: RunStats) -> set[str]:
    """Biases whose gradient is zero in theory, by their module's weight gradient."""
    weights = {p.module: p for p in stats.params if p.name.endswith("weight") and p.has_grad}
    out = set()
    for p in _live(stats):
        w = weights.get(p.module)
        if p.name.endswith("bias") and w is not None and w.grad_norm and w.finite:
            if dense_rms(p) < THEORY_ZERO * dense_rms(w):
                out.add(p.name)
    return out


def blocked_by_zero_init(stats: RunStats) -> tuple[list[ParamStats], set[str]]:
    """The zero-initialised multiplicative tensors that one step moves, and the zero-gradient
    parameters they explain: those that run before the last of them (the zeros resolve after
    one step). A zero tensor with a zero gradient of its own is not one of them unless such a
    tensor runs after it: see `stuck_at_zero`."""
    blockers = [p for p in stats.params if _zero_init(p) and _multiplies(p)]
    moving = [p for p in blockers if p.has_grad and p.grad_max != 0]
    if not moving:
        return [], set()
    blockers = [p for p in blockers if p in moving or (p.depth or 0) <= max_depth(moving)]
    last = max_depth(blockers)
    zero = {  # depth None: used functionally (nn.MultiheadAttention's out_proj), order unknown
        p.name
        for p in stats.params
        if p.has_grad and p.grad_max == 0 and p.numel > 0 and (p.depth or 0) <= last
    }
    return blockers, zero


def max_depth(params: list[ParamStats]) -> int:
    return max(p.depth or 0 for p in params)


def stuck_at_zero(stats: RunStats) -> list[ParamStats]:
    """Zero-initialised multiplicative tensors whose own gradient is zero too, with no tensor
    that one step moves running after them: no optimizer step ever changes them (LoRA with
    both A and B zero: each factor's gradient is proportional to the other)."""
    blockers = [p for p in stats.params if _zero_init(p) and _multiplies(p)]
    moving = [p for p in blockers if p.has_grad and p.grad_max != 0]
    last = max_depth(moving) if moving else -1
    return [
        p
        for p in blockers
        if p.has_grad and p.grad_max == 0 and (not moving or (p.depth or 0) > last)
    ]


_ADDED = ("bias", "pos", "embed", "token", "cls")
"""Names of tensors that are added (or looked up), not multiplied, when they are matrices."""


def _multiplies(p: ParamStats) -> bool:
    """A weight, gate or low-rank factor multiplies its input (a zero one blocks the flow); a
    bias, a class token or a position embedding is added."""
    last = p.name.rpartition(".")[2].lower()
    if last.endswith("weight") or any(k in last for k in ("gamma", "scale", "lambda", "gate")):
        return True
    return len(p.shape) == 2 and not p.lookup and not any(k in last for k in _ADDED)


NORMALISERS = ("BatchNorm", "SyncBatchNorm", "GroupNorm", "InstanceNorm")
"""Modules that normalise their input per channel: the weight feeding one is scale-invariant."""


def scale_invariant(stats: RunStats) -> set[str]:
    """Weights whose module's output goes straight into a BatchNorm/GroupNorm/InstanceNorm.

    The norm undoes any rescaling of such a weight (L(c·w) = L(w)), so its gradient is
    ∝ 1/‖w‖: a small init (HF's std 0.02 convolutions) or a plain deep BN stack (inception)
    makes it large without anything being wrong, and the norm layer absorbs any step's
    scale. Found by forward order: the next module entered after the weight's own is the norm.
    """
    by_order = {m.order: m for m in stats.modules if m.order is not None}
    out = set()
    for p in stats.params:
        if p.depth is None or not p.name.endswith("weight"):
            continue
        following = by_order.get(p.depth + 1)
        if (
            following is not None
            and following.kind.startswith(NORMALISERS)
            and not following.name.startswith(p.module + ".")
        ):
            out.add(p.name)
    return out


def _judged_rms(p: ParamStats, invariant: set[str], terms: int = 1) -> float:
    """The per-element RMS explode-rms bounds: a scale-invariant weight's is taken at unit
    weight RMS (g(c·w) = g(w)/c, so g·rms(w) does not depend on the init's arbitrary scale);
    under a loss that sums `terms` terms, per term (as the same loss reduced by mean)."""
    return (dense_rms(p) * _wrms(p) if p.name in invariant else dense_rms(p)) / terms


def _per_term(stats: RunStats) -> tuple[int, str]:
    """The divisor of the absolute bounds, and the words that say so in a message."""
    n = stats.loss_terms or 1
    return n, (
        f" per term of the loss, which adds up {n:,} terms (reduction='sum')" if n > 1 else ""
    )


def _medians(pool: list[ParamStats]) -> dict[bool, float]:
    """Median gradient RMS of the lookup tables and of the other tensors, separately.

    An embedding table's gradient is a sum of activation gradients over the tokens that
    used each row, a weight's is x·dy summed over the batch: different quantities, whose
    scales differ by design (HF BART: tables ~1e3x its dense weights at init)."""
    out = {}
    for kind in (False, True):
        values = [dense_rms(p) for p in pool if p.lookup is kind]
        if values:
            out[kind] = statistics.median(values)
    return out


@check("GS104")
def exploding(stats: RunStats, t: Thresholds) -> list[Finding]:
    by_design = set(layer_scaled(stats)) | theory_zero(stats)
    live = [p for p in _live(stats) if not _zero_init(p)]
    pool = [p for p in live if p.name not in by_design]
    medians = _medians(pool)
    depths = [p.depth for p in pool if p.depth is not None]
    middle = statistics.median(depths) if depths else None
    invariant = scale_invariant(stats)
    terms, per_term = _per_term(stats)
    out = []
    for p in live:
        norm, rms = p.grad_norm or 0.0, dense_rms(p)
        judged = _judged_rms(p, invariant, terms)
        median = medians.get(p.lookup, 0.0)
        # an explosion grows on its way back to the input: a tensor that runs late (a head)
        # far above the rest means the rest's gradient is small, which GS105 judges
        early = p.depth is not None and middle is not None and p.depth < middle
        ratio = rms / median if median and early and p.name not in by_design else 0.0
        if judged > t.explode_rms:
            at_unit = " at unit weight RMS (it feeds a norm layer)" if p.name in invariant else ""
            msg = (
                f"grad RMS of {p.name} is {num(judged)} per element{at_unit}{per_term} > "
                f"explode-rms {num(t.explode_rms)}"
            )
            value, threshold = judged, t.explode_rms
        elif ratio > t.explode_median_ratio and norm > t.explode_min_norm and rms > _wrms(p):
            # also larger than the weight itself: one SGD step would more than rewrite it
            msg = (
                f"grad RMS of {p.name} is {num(ratio)}x the model's median > "
                f"explode-median-ratio {num(t.explode_median_ratio)}"
            )
            value, threshold = ratio, t.explode_median_ratio
        else:
            continue
        out.append(
            RULES["GS104"].finding(
                p.name,
                msg,
                "clip gradients (torch.nn.utils.clip_grad_norm_), lower the learning "
                "rate, or normalise activations (LayerNorm/BatchNorm) and check the weight init",
                value,
                threshold,
            )
        )
    return out + total_norm(stats, t)


def total_norm(stats: RunStats, t: Thresholds) -> list[Finding]:
    """The absolute bound belongs to the whole model (what clip_grad_norm_ clips), over the
    gradients whose size means something: not the scale-invariant weights feeding a norm
    layer, whose gradient is ∝ 1/‖w‖ by design (see `scale_invariant`)."""
    live = [p for p in _live(stats) if not _zero_init(p)]
    invariant = scale_invariant(stats)
    terms, per_term = _per_term(stats)
    if any(_judged_rms(p, invariant, terms) > t.explode_rms for p in live):
        return []  # GS104 already names the exploding tensors
    counted = [p for p in live if p.name not in invariant]
    total = sum((p.grad_norm or 0.0) ** 2 for p in counted) ** 0.5 / terms
    if total <= t.explode_norm:
        return []
    left_out = f" (leaving out {len(invariant)} scale-invariant weights)" if invariant else ""
    return [
        RULES["GS104"].finding(
            "total",
            f"total grad norm over {len(counted)} parameter tensors{left_out} is "
            f"{num(total)}{per_term} > explode-norm {num(t.explode_norm)}",
            "clip gradients (torch.nn.utils.clip_grad_norm_), lower the learning rate, or "
            "check the weight init and normalisation",
            total,
            t.explode_norm,
        )
    ]


def _module_rms(params: Iterable[ParamStats]) -> float:
    params = list(params)
    sq = sum((p.grad_norm or 0.0) ** 2 for p in params)
    n = sum(p.numel * (1.0 - (p.zero_fraction or 0.0)) for p in params)
    return (sq / max(n, 1.0)) ** 0.5


@check("GS105")
def vanishing(stats: RunStats, t: Thresholds) -> list[Finding]:
    by_design = set(layer_scaled(stats)) | theory_zero(stats) | depth.gated_factors(stats.params)
    live = [p for p in _live(stats) if p.name not in by_design]
    out = [
        RULES["GS105"].finding(
            p.name,
            f"grad norm of {p.name} is {num(p.grad_norm)} < vanish-norm {num(t.vanish_norm)}",
            "the gradient barely reaches this parameter: replace "
            "saturating activations (sigmoid/tanh) with ReLU/GELU, add residual connections or "
            "normalisation",
            p.grad_norm,
            t.vanish_norm,
        )
        for p in live
        if (p.grad_norm or 0.0) < t.vanish_norm
    ]
    by_depth = sorted((p for p in live if p.depth is not None), key=lambda p: p.depth or 0)
    if len({p.depth for p in by_depth}) < 2:
        return out
    first_depth, last_depth = by_depth[0].depth, by_depth[-1].depth
    first = [p for p in by_depth if p.depth == first_depth]
    last = [p for p in by_depth if p.depth == last_depth]
    last_rms = _module_rms(last)
    ratio = _module_rms(first) / last_rms if last_rms else 0.0
    same = depth.same_role_last(first[0].module, by_depth)  # the first block's query: the last's
    if same and _module_rms(first) >= t.vanish_depth_ratio * _module_rms(same):
        return out  # as large as its own kind deeper down: a difference of kind, not of depth
    if ratio < t.vanish_depth_ratio and first[0].name not in {f.subject for f in out}:
        out.append(
            RULES["GS105"].finding(
                first[0].module or first[0].name,
                f"grad RMS of the first layer run (`{first[0].module}`) is {num(ratio)}x "
                f"that of the last (`{last[0].module}`) < vanish-depth-ratio "
                f"{num(t.vanish_depth_ratio)}",
                "the gradient shrinks layer by layer on its way back: use ReLU/GELU instead of "
                "sigmoid/tanh, residual connections, normalisation, or a better init",
                ratio,
                t.vanish_depth_ratio,
            )
        )
    return out


@check("GS106")
def zero_grad(stats: RunStats, t: Thresholds) -> list[Finding]:
    _, explained = blocked_by_zero_init(stats)
    routed = idle_experts(stats)
    stuck = stuck_at_zero(stats)
    names = ", ".join(p.name for p in stuck[:6]) + (" ..." if len(stuck) > 6 else "")
    explained = explained | {p.name for p in stuck}
    out = [
        RULES["GS106"].finding(
            p.name,
            f"{p.name} is all zeros and so is its gradient: it is stuck at zero, no optimizer "
            "step will ever move it (no zero-initialised tensor that a step does move runs "
            f"after it; zero with zero gradients: {names})",
            "initialise one factor randomly and only the other to zero (LoRA: A with "
            "nn.init.kaiming_uniform_(A, a=math.sqrt(5)), B zeros), so the first step moves it",
            0.0,
        )
        for p in stuck
    ]
    return out + [
        RULES["GS106"].finding(
            p.name,
            f"grad of {p.name} is all zeros ({p.numel} elements)",
            "the parameter is in the graph but nothing flows back: look for dead ReLUs (large "
            "negative bias), a multiplication by zero or a mask that is always off",
            0.0,
        )
        for p in stats.params
        if p.has_grad
        and p.grad_max == 0
        and p.numel > 0
        and p.name not in explained
        and p.name not in routed
    ]


@check("GS108")
def zero_init(stats: RunStats, t: Thresholds) -> list[Finding]:
    blockers, explained = blocked_by_zero_init(stats)
    if not explained:
        return []
    names = ", ".join(p.name for p in blockers[:6]) + (" ..." if len(blockers) > 6 else "")
    return [
        RULES["GS108"].finding(
            blockers[0].name,
            f"{len(explained)} parameter tensors get an all-zero gradient because "
            f"{len(blockers)} tensor(s) are initialised to zero by design ({names}): "
            "a zero head, a zero-init residual or a zero gate",
            "nothing to do: a deliberate zero initialisation; it resolves after the first "
            "optimizer step (inspect again after one step to see the real gradients)",
            float(len(explained)),
        )
    ]


@check("GS107")
def frozen(stats: RunStats, t: Thresholds) -> list[Finding]:
    groups: dict[str, list[ParamStats]] = {}
    for p in stats.params:
        if not p.requires_grad:
            groups.setdefault(p.module.partition(".")[0] or p.name, []).append(p)
    return [
        RULES["GS107"].finding(
            top,
            f"{len(ps)} frozen parameter tensors ({sum(p.numel for p in ps):,} elements) "
            f"under `{top}`",
            "expected for fine-tuning; if not, call requires_grad_(True) on them",
            float(len(ps)),
        )
        for top, ps in groups.items()
    ]
