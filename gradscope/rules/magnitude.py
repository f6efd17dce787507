"""Per-run rules on the size of gradients: exploding (GS104) and vanishing (GS105), each
judged without the scales set by design (by_design.py).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from gradscope.config import Thresholds
from gradscope.findings import RULES, Finding, Rule, Severity, Threshold
from gradscope.fmt import num
from gradscope.rules import depth, input_near_zero, loss_scale, set_from_batch
from gradscope.rules.by_design import layer_scaled, scale_invariant, theory_zero
from gradscope.rules.params import comparable, dense_rms, is_zero_init, weight_rms
from gradscope.rules.registry import DECLARED, Stage, rule
from gradscope.stats import ParamStats, RunStats


def _judged_rms(p: ParamStats, invariant: set[str], terms: float = 1) -> float:
    """The per-element RMS explode-rms bounds: a scale-invariant weight's is taken at unit
    weight RMS (g(c·w) = g(w)/c, so g·rms(w) does not depend on the init's arbitrary scale);
    under a loss that sums `terms` terms, per term (as the same loss reduced by mean)."""
    return (dense_rms(p) * weight_rms(p) if p.name in invariant else dense_rms(p)) / terms


def _per_term(stats: RunStats) -> tuple[float, str]:
    """The divisor of the absolute bounds, and the words that say so in a message: per term
    of a summed loss, or per unit of a loss whose scale made the gradient large (loss_scale)."""
    n = stats.loss_terms or 1
    if n == 1:
        return loss_scale.per_unit(stats, [p for p in comparable(stats) if not is_zero_init(p)])
    return n, f" per term of the loss, which adds up {n:,} terms (reduction='sum')"


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


@rule(
    "GS104",
    "exploding",
    Severity.ERROR,
    "exploding",
    Stage.RUN,
    "a gradient norm is above the absolute threshold or far above the model's median",
    example="a deep stack of linear layers initialised with gain 2",
    fix=(
        "clip gradients (torch.nn.utils.clip_grad_norm_), lower the learning rate, add "
        "normalisation (LayerNorm, BatchNorm) or fix the weight init"
    ),
    thresholds=(
        Threshold(
            "explode-rms",
            1e2,
            "a parameter's gradient RMS per element above this is exploding, whatever the "
            "tensor's size; a scale-invariant weight (feeding a norm layer) is judged at unit "
            "weight RMS, i.e. RMS(g)·RMS(w)",
        ),
        Threshold(
            "explode-median-ratio",
            1e3,
            "a gradient RMS this many times the model's median RMS is exploding... "
            "(`--explode-median-ratio`); embedding tables are compared with embedding tables, and"
            " only a tensor that runs before most of the model can fire (an explosion grows on "
            "its way back to the input; a late head far above a small body is the body's gradient"
            " being small, GS105's business)",
        ),
        Threshold(
            "explode-min-norm",
            1.0,
            "...if its norm is above this too: a large ratio over vanished neighbours is "
            "vanishing, not exploding",
        ),
        Threshold(
            "explode-norm",
            1e3,
            "the total gradient L2 norm over the model above this is exploding "
            "(`--explode-norm`); weights feeding a BatchNorm/GroupNorm/InstanceNorm, and the sole "
            "weight of a module whose output a LayerNorm/RMSNorm reads as is (an embedding table "
            "before its LayerNorm), are left out (scale-invariant: their gradient is ∝ 1/‖w‖ by "
            "design); a single tensor is judged by `explode-rms` instead",
        ),
    ),
    command="gradscope inspect exploding-deep",
    objectives=(
        "any: the gradients' size, whatever the loss means; under reduction='sum' the "
        "absolute bounds are per summed term, so a summed loss is judged as the same loss "
        "reduced by mean; where the gradient is largest at the output and shrinks on its way "
        "back to the input (a bias's gradient, layer by layer), a loss made large by its units "
        "(a force field's), they are per unit of the loss"
    ),
)
def exploding(stats: RunStats, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """Any one of three measurements: one tensor's gradient RMS per element above explode-rms (a
    weight feeding a BatchNorm/GroupNorm, or the sole weight of a module a LayerNorm/RMSNorm
    reads as is, is scale-invariant and judged at unit weight RMS); a
    tensor that runs in the first half of the model with a gradient RMS explode-median-ratio
    times the median of its kind (embedding tables against tables, the rest against the rest), a
    norm above explode-min-norm and an RMS larger than its weights'; or the total gradient norm,
    what clip_grad_norm_ clips, above explode-norm. Under reduction='sum' the absolute bounds are
    per summed term; per unit of a loss above 1 whose signal shrinks on its way back to the
    input (loss_scale.py). The explanation pass shows how activations grow layer by layer."""
    by_design = set(layer_scaled(stats)) | theory_zero(stats)
    live = [p for p in comparable(stats) if not is_zero_init(p)]
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
            out.append(_explodes(this, p.name, msg, judged, t.explode_rms))
        elif ratio > t.explode_median_ratio and norm > t.explode_min_norm and rms > weight_rms(p):
            # also larger than the weight itself: one SGD step would more than rewrite it
            msg = (
                f"grad RMS of {p.name} is {num(ratio)}x the model's median > "
                f"explode-median-ratio {num(t.explode_median_ratio)}"
            )
            out.append(_explodes(this, p.name, msg, ratio, t.explode_median_ratio))
    return out + total_norm(stats, t)


def _explodes(this: Rule, name: str, msg: str, value: float, threshold: float) -> Finding:
    return this.finding(
        name,
        msg,
        "clip gradients (torch.nn.utils.clip_grad_norm_), lower the learning "
        "rate, or normalise activations (LayerNorm/BatchNorm) and check the weight init",
        value,
        threshold,
    )


def total_norm(stats: RunStats, t: Thresholds) -> list[Finding]:
    """The absolute bound belongs to the whole model (what clip_grad_norm_ clips), over the
    gradients whose size means something: not the scale-invariant weights feeding a norm
    layer, whose gradient is ∝ 1/‖w‖ by design (see `scale_invariant`)."""
    live = [p for p in comparable(stats) if not is_zero_init(p)]
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


@rule(
    "GS105",
    "vanishing",
    Severity.WARNING,
    "vanishing",
    Stage.RUN,
    "a gradient norm is tiny, or the first layer's gradients are far smaller than the last's",
    example="sixteen Linear+Sigmoid layers",
    fix=(
        "ReLU or GELU instead of sigmoid/tanh, residual connections, normalisation, or a better "
        "init"
    ),
    thresholds=(
        Threshold(
            "vanish-norm",
            1e-7,
            "a non-zero gradient L2 norm below this is vanishing (`--vanish-norm`)",
        ),
        Threshold(
            "vanish-depth-ratio",
            1e-3,
            "gradient RMS of the first layer run over that of the last, below this "
            "(`--vanish-depth-ratio`)",
        ),
    ),
    command="gradscope inspect vanishing-sigmoid",
    objectives=(
        "any: the depth ratio is the same whatever the loss or its scale; the vanish-norm "
        "bound is absolute, so a loss scaled far down (a tiny weight on it) makes every "
        "gradient small and reads as vanishing"
    ),
)
def vanishing(stats: RunStats, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """A non-zero gradient L2 norm below vanish-norm; or the gradient RMS of the first layer that
    ran divided by the last layer's below vanish-depth-ratio: the gradient shrinks on its way
    back. Layer-scale branches and biases whose gradient is zero in theory are left out, and so
    is the factor of a low-rank product (LoRA's A) whose gradient passes through a smaller
    partner (B, zero at init). When the first layer's kind of tensor repeats deeper (each block's
    query), the first is compared with the last of its own kind too: a query at init is small in
    every block alike, which is no shrink with depth. The explanation pass counts the
    sigmoid/tanh calls and their mean derivative."""
    by_design = set(layer_scaled(stats)) | theory_zero(stats) | depth.gated_factors(stats.params)
    live = [p for p in comparable(stats) if p.name not in by_design]
    judged = [p for p in live if p.name not in set_from_batch.names(stats)]
    out = _tiny_norms(live, stats, t, this)
    by_depth = sorted((p for p in judged if p.depth is not None), key=lambda p: p.depth or 0)
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
            this.finding(
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


def _set_from_batch(found: Finding, stats: RunStats, p: ParamStats, t: Thresholds) -> Finding:
    """A vanishing norm of a parameter set from this very batch is information, and so is a
    weight's whose layer's bias got a gradient (its input is near zero)."""
    if found.subject in set_from_batch.names(stats):
        return set_from_batch.as_information(found, found.subject)
    bias = input_near_zero.layer_bias(p, stats, t.vanish_norm)
    return found if bias is None else input_near_zero.as_information(found, p, bias)


def _tiny_norms(
    live: list[ParamStats], stats: RunStats, t: Thresholds, this: Rule
) -> list[Finding]:
    """GS105 on each tensor whose norm is below vanish-norm."""
    return [
        _set_from_batch(
            this.finding(
                p.name,
                f"grad norm of {p.name} is {num(p.grad_norm)} < vanish-norm {num(t.vanish_norm)}",
                "the gradient barely reaches this parameter: replace "
                "saturating activations (sigmoid/tanh) with ReLU/GELU, add residual connections or "
                "normalisation",
                p.grad_norm,
                t.vanish_norm,
            ),
            stats,
            p,
            t,
        )
        for p in live
        if (p.grad_norm or 0.0) < t.vanish_norm
    ]
