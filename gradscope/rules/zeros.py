"""Per-run rules on gradients that are zero, or absent, for a known reason: all zeros
(GS106), a zero initialisation by design (GS108), frozen parameters (GS107).
"""

from __future__ import annotations

from gradscope.config import Thresholds
from gradscope.findings import Finding, Rule, Severity
from gradscope.rules import frozen_gate, shift_invariance, switched_off, zero_derivative
from gradscope.rules.by_design import blocked_by_zero_init, stuck_at_zero
from gradscope.rules.experts import idle_experts
from gradscope.rules.registry import DECLARED, Stage, rule
from gradscope.stats import ParamStats, RunStats


@rule(
    "GS106",
    "zero-grad",
    Severity.WARNING,
    "vanishing",
    Stage.RUN,
    "a gradient exists but every element is exactly zero",
    example="a ReLU layer whose bias keeps every unit off",
    fix=(
        "look for the dead ReLU (a large negative bias: re-initialise it, or use LeakyReLU), a "
        "multiplication by zero or a mask that is always off; for LoRA initialise A randomly and "
        "only B to zero; behind torch.sign or round, a straight-through estimator"
    ),
    command="gradscope inspect dead-relu",
)
def zero_grad(stats: RunStats, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """A gradient exists but every element is exactly zero (max |grad| is 0). The explanation
    pass names a ReLU whose outputs are all zero. Zeros that a zero initialisation explains are
    GS108, an idle expert is GS109; a zero tensor whose own gradient is zero too, with nothing
    after it that a step moves (both LoRA factors zero), is reported here as stuck at zero.
    A bias whose weight has a gradient is information: the loss is blind to a shift of its
    layer's outputs (rules/shift_invariance.py). Behind a product with a frozen parameter that
    is all zeros (a ReZero alpha with requires_grad=False) the warning names that gate; behind
    torch.sign or round on every path (a binarised layer without a straight-through estimator),
    or one custom Function, it names that op (rules/zero_derivative.py)."""
    _, explained = blocked_by_zero_init(stats)
    routed = idle_experts(stats)
    stuck = stuck_at_zero(stats)
    names = ", ".join(p.name for p in stuck[:6]) + (" ..." if len(stuck) > 6 else "")
    explained = explained | {p.name for p in stuck}
    out = [
        this.finding(
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
    return out + _all_zero(stats, explained | set(routed), this)


def _all_zero(stats: RunStats, explained: set[str], this: Rule) -> list[Finding]:
    """All-zero gradients not explained elsewhere: information for a bias beside a weight
    that has a gradient (shift_invariance.py), a warning for the rest."""
    out = []
    learned = {p.name for p in stats.params if p.has_grad and (p.grad_max or 0) > 0}
    for p in stats.params:
        if not (p.has_grad and p.grad_max == 0 and p.numel > 0):
            continue
        if p.name in explained:
            continue
        if p.name in stats.frozen_gated:
            out.append(frozen_gate.finding(this, stats, p.name, p.numel))
            continue
        if p.name in stats.weighted_off:
            head = f"grad of {p.name} is all zeros ({p.numel} elements)"
            out.append(switched_off.as_information(this.finding(p.name, head, "", 0.0), p.name))
            continue
        if p.name in stats.clamped_off:
            head = f"grad of {p.name} is all zeros ({p.numel} elements)"
            out.append(switched_off.as_clamped(this.finding(p.name, head, "", 0.0), p.name))
            continue
        flat = dict(stats.flat_off).get(p.name)
        if flat is not None:
            head = f"grad of {p.name} is all zeros ({p.numel} elements)"
            out.append(
                zero_derivative.told(this.finding(p.name, head, "", 0.0), p.name, flat, head)
            )
            continue
        weight = shift_invariance.weight_among(p.name, p.shape, learned)
        if weight is not None:
            head = f"grad of {p.name} is all zeros ({p.numel} elements)"
            found = this.finding(p.name, head, shift_invariance.ADVICE, 0.0)
            out.append(shift_invariance.as_information(found, head, weight, "has a gradient"))
            continue
        out.append(
            this.finding(
                p.name,
                f"grad of {p.name} is all zeros ({p.numel} elements)",
                "the parameter is in the graph but nothing flows back: look for dead ReLUs "
                "(large negative bias), a multiplication by zero or a mask that is always off",
                0.0,
            )
        )
    return out


@rule(
    "GS108",
    "zero-init",
    Severity.INFO,
    "zero-init",
    Stage.RUN,
    "zero-initialised tensors (by design) block the gradient of the layers before them",
    example=(
        "a zero-initialised classification head, a zero-init residual branch or a zero gate "
        "(nn.init.zeros_(model.head.weight))"
    ),
    fix=(
        "nothing: the zeros resolve after the first step; `gradscope inspect --script train.py "
        "--step 2` shows the gradients after it"
    ),
)
def zero_init(stats: RunStats, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """Parameters get an all-zero gradient because a tensor that multiplies the signal (a weight,
    gate or scale) is initialised to zero by design and its own gradient is not zero, so the
    first optimizer step moves it. One finding names the zero tensors instead of a GS106 for
    every parameter before them."""
    blockers, explained = blocked_by_zero_init(stats)
    if not explained:
        return []
    names = ", ".join(p.name for p in blockers[:6]) + (" ..." if len(blockers) > 6 else "")
    return [
        this.finding(
            blockers[0].name,
            f"{len(explained)} parameter tensors get an all-zero gradient because "
            f"{len(blockers)} tensor(s) are initialised to zero by design ({names}): "
            "a zero head, a zero-init residual or a zero gate",
            "nothing to do: a deliberate zero initialisation; it resolves after the first "
            "optimizer step (inspect again after one step to see the real gradients)",
            float(len(explained)),
        )
    ]


@rule(
    "GS107",
    "frozen",
    Severity.INFO,
    "none-grad",
    Stage.RUN,
    "parameters with requires_grad=False (counted per module)",
    example="a frozen backbone under a trainable head",
    fix=(
        "nothing if it is meant; else call requires_grad_(True) on them. To make it fail a build: "
        '[tool.gradscope.severity] frozen = "error"'
    ),
    command="gradscope inspect frozen-layers",
)
def frozen(stats: RunStats, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """Parameters with requires_grad=False, counted per top-level module. Information only:
    fine-tuning freezes layers on purpose."""
    groups: dict[str, list[ParamStats]] = {}
    for p in stats.params:
        if not p.requires_grad:
            groups.setdefault(p.module.partition(".")[0] or p.name, []).append(p)
    return [
        this.finding(
            top,
            f"{len(ps)} frozen parameter tensors ({sum(p.numel for p in ps):,} elements) "
            f"under `{top}`",
            "expected for fine-tuning; if not, call requires_grad_(True) on them",
            float(len(ps)),
        )
        for top, ps in groups.items()
    ]
