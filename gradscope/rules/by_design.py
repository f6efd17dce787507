"""Scales set by design: three designs make gradients tiny, zero or lopsided on purpose
(layer scales, zero initialisation, weights feeding a norm layer); judging them against
the rest of the model is what made healthy ConvNeXt, ViT and ResNet models look broken.
"""

from __future__ import annotations

from gradscope.rules.params import (
    ancestors,
    comparable,
    dense_rms,
    is_zero_init,
    parent,
    weight_rms,
)
from gradscope.stats import ParamStats, RunStats

LAYER_SCALE_RMS = 1e-3
"""A trainable tensor with non-zero weights this small (per element) scales a residual branch:
ConvNeXt/CaiT `gamma`, BEiT `lambda` (initialised to 1e-6..1e-4)."""

THEORY_ZERO = 1e-4
"""A bias whose gradient RMS is this far below its own module's weight gradient is zero up to
rounding (softmax shift invariance for an attention key bias; BatchNorm removing a bias)."""


def layer_scaled(stats: RunStats) -> dict[str, str]:
    """Parameter name → the layer-scale tensor whose branch it lives in."""
    scales = [
        p
        for p in stats.params
        if p.requires_grad and 0 < weight_rms(p) < LAYER_SCALE_RMS and p.numel > 1
    ]
    by_module: dict[str, list[tuple[int, ParamStats]]] = {}  # its first two, in order
    for i, scale in enumerate(scales):
        if len(kept := by_module.setdefault(_branch_owner(stats, scale), [])) < 2:
            kept.append((i, scale))
    out: dict[str, str] = {}
    if not by_module:
        return out
    for p in stats.params:  # the first scale tensor, other than p, of a module above p
        owners = [
            next(o for o in by_module[m] if o[1] is not p)
            for m in ancestors(p.module)
            if m in by_module and any(s is not p for _, s in by_module[m])
        ]
        if owners:
            out[p.name] = min(owners, key=lambda o: o[0])[1].name
    return out


def _branch_owner(stats: RunStats, scale: ParamStats) -> str:
    """The module whose branch a scale multiplies: its own, or, where the scale is alone in a
    module of its own (timm's `ls1 = LayerScale(dim)` beside `attn`), the block above it."""
    inside = [p for p in stats.params if (p.module + ".").startswith(scale.module + ".")]
    alone = inside == [scale]
    return parent(scale.module) if alone and scale.module else scale.module


def theory_zero(stats: RunStats) -> set[str]:
    """Biases whose gradient is zero in theory, by their module's weight gradient."""
    weights = {p.module: p for p in stats.params if p.name.endswith("weight") and p.has_grad}
    out = set()
    for p in comparable(stats):
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
    blockers = [p for p in stats.params if is_zero_init(p) and _multiplies(p, stats)]
    moving = [p for p in blockers if p.has_grad and p.grad_max != 0]
    if not moving:
        return [], set()
    blockers = [p for p in blockers if p in moving or (p.depth or 0) <= max_depth(moving)]
    last = max_depth(blockers)
    gated = set(stats.zero_gated)  # behind a gate, by the graph: whatever ran first
    zero = {  # depth None: used functionally (nn.MultiheadAttention's out_proj), order unknown
        p.name
        for p in stats.params
        if p.has_grad
        and p.grad_max == 0
        and p.numel > 0
        and ((p.depth or 0) <= last or p.name in gated)
    }
    return blockers, zero


def max_depth(params: list[ParamStats]) -> int:
    return max(p.depth or 0 for p in params)


def stuck_at_zero(stats: RunStats) -> list[ParamStats]:
    """Zero-initialised multiplicative tensors whose own gradient is zero too, with no tensor
    that one step moves running after them: no optimizer step ever changes them (LoRA with
    both A and B zero: each factor's gradient is proportional to the other)."""
    blockers = [p for p in stats.params if is_zero_init(p) and _multiplies(p, stats)]
    moving = [p for p in blockers if p.has_grad and p.grad_max != 0]
    last = max_depth(moving) if moving else -1
    return [
        p
        for p in blockers
        if p.has_grad and p.grad_max == 0 and (not moving or (p.depth or 0) > last)
    ]


_ADDED = ("bias", "pos", "embed", "token", "cls")
"""Names of tensors that are added (or looked up), not multiplied, when they are matrices."""


def _multiplies(p: ParamStats, stats: RunStats) -> bool:
    """A weight, gate or low-rank factor multiplies its input (a zero one blocks the flow); a
    bias, a class token or a position embedding is added. A product the graph shows is one."""
    if p.name in stats.zero_gates:
        return True
    last = p.name.rpartition(".")[2].lower()
    if last.endswith("weight") or any(k in last for k in ("gamma", "scale", "lambda", "gate")):
        return True
    return len(p.shape) == 2 and not p.lookup and not any(k in last for k in _ADDED)


NORMALISERS = ("BatchNorm", "SyncBatchNorm", "GroupNorm", "InstanceNorm")
"""Modules that normalise their input per channel: the weight feeding one is scale-invariant."""


def scale_invariant(stats: RunStats) -> set[str]:
    """Weights whose module's output goes straight into a BatchNorm/GroupNorm/InstanceNorm,
    and sole weights of modules whose output a LayerNorm/RMSNorm read as is (norm_fed).

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
    return out | _sole_weights(stats, set(stats.norm_fed))


def _sole_weights(stats: RunStats, modules: set[str]) -> set[str]:
    """The weight of each of `modules` that has no other parameter: a bias added after it
    would not scale with it, so the norm would not undo a rescaling of the weight alone."""
    owned: dict[str, list[ParamStats]] = {}
    for p in stats.params:
        if p.module in modules:
            owned.setdefault(p.module, []).append(p)
    return {ps[0].name for ps in owned.values() if len(ps) == 1 and ps[0].name.endswith("weight")}
