"""Per-run rules on missing and non-finite gradients: None (GS101), a non-finite loss
(GS102) or gradient (GS103).
"""

from __future__ import annotations

from dataclasses import replace

from gradscope.config import Thresholds
from gradscope.findings import Finding, Rule, Severity
from gradscope.fmt import num
from gradscope.rules import (
    derivative_bias,
    detached_by_owner,
    frozen_by_no_grad,
    layer_drop,
    shift_invariance,
    stack_tail,
)
from gradscope.rules.experts import idle_experts
from gradscope.rules.params import trainable
from gradscope.rules.registry import DECLARED, Stage, rule
from gradscope.stats import ParamStats, RunStats

UNUSED = ", or nothing the loss depends on uses its output"
CUT_ADVICE = (
    "find the .detach(), .data, torch.no_grad() or non-torch round-trip between the module "
    "and the loss"
)
REENTRANT_CUT = "a reentrant torch.utils.checkpoint"
"""How the explanation passes name a cut made by checkpoint(use_reentrant=True) over inputs
that do not require grad: its region runs under no_grad and its backward never runs."""
STEP_CUT = "an integer or boolean op, which has no gradient"
"""How the explanation passes name a cut made by a comparison, a rounding to integers or an
argmax: its output has no gradient at all, so the fix is a surrogate, not removing a cut."""
STEP_ADVICE = (
    "a comparison or rounding passes no gradient back: if the step is part of the model (a "
    "spiking neuron's threshold, a quantizer, a hard gate), keep it in the forward and give it "
    "a surrogate gradient (a torch.autograd.Function whose backward is a smooth derivative: fast "
    "sigmoid, arctan) or a straight-through estimator (soft + (hard - soft).detach()); if it only "
    "selects (a mask for torch.where), let the values reach the loss through what it selects"
)
INDEX_CUT = "integer indices, which carry no gradient (only the values beside them do)"
"""How the explanation passes name a cut at an op that returns values and indices (topk,
max over a dim, sort) when only its indices went on toward the loss."""
INDEX_ADVICE = (
    "what is read only through the indices it selects (a router's top-k choice of tokens or "
    "experts) gets no gradient: scale what was selected by the selected values (Mixture-of-Depths "
    "and MoE layers multiply each routed output by its router weight), or give the choice a "
    "straight-through or REINFORCE estimator"
)
UNUSED_ADVICE = (
    "; an output left unused (the last block's residual branch where only the skip outputs "
    "are summed, as in WaveNet) makes the module dead weight: delete it or freeze it"
)
LATER_STEP_ADVICE = (
    "; this is one step of the script: a later step's loss may use an output this one leaves "
    "out (a variance head trained after a warm-up of its mean, phases that train one head at a "
    "time), so inspect such a step (--step N) or watch the run before deleting or freezing it"
)
"""A script's step is one of many: what it leaves unused is not unused for good."""


def cut_found(f: Finding) -> Finding:
    """A none-grad finding whose evidence names the op that cut the graph: a cut, not an
    output left unused."""
    cuts = [e for e in f.evidence if e.startswith("graph cut by")]
    if f.slug != "none-grad" or not cuts:
        return f
    if frozen_by_no_grad.read_inside(f.subject, cuts):
        return frozen_by_no_grad.as_inspected(replace(f, message=f.message.replace(UNUSED, "")))
    if detached_by_owner.read_detached(f.subject, cuts):
        return detached_by_owner.as_inspected(replace(f, message=f.message.replace(UNUSED, "")))
    step = all(STEP_CUT in e or INDEX_CUT in e for e in cuts)  # no .detach() or no_grad
    index = all(INDEX_CUT in e for e in cuts)
    advice = INDEX_ADVICE if index else STEP_ADVICE if step else CUT_ADVICE
    if all(e.startswith(f"graph cut by {REENTRANT_CUT}") for e in cuts):
        advice = frozen_by_no_grad.REENTRANT_ADVICE
    return replace(f, message=f.message.replace(UNUSED, ""), advice=advice)


@rule(
    "GS101",
    "none-grad",
    Severity.ERROR,
    "none-grad",
    Stage.RUN,
    "a parameter with requires_grad=True got no gradient",
    example=(
        "an encoder whose output is .detach()ed before the decoder, or a submodule that forward "
        "never calls"
    ),
    fix=(
        "remove the cut between the module and the loss (a comparison that is part of the model, a "
        "spiking neuron's threshold, needs a surrogate gradient); call a module that should run, "
        "or delete it or freeze it (requires_grad_(False)) if it is unused on purpose"
    ),
    command="gradscope inspect detached-middle",
)
def none_grad(stats: RunStats, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """After the backward a parameter with requires_grad=True still has .grad None. The finding
    says which of three it is: the loss itself does not require grad; the parameter's module
    never ran in the forward; or it ran but its output does not reach the loss, and then the
    explanation pass names the op that cut the graph (.detach(), .data, torch.no_grad(), a numpy
    round-trip) with its file and line. A bias beside a weight that got a gradient, under a
    loss read through a derivative taken with create_graph, is information (its constant
    has derivative 0: rules/derivative_bias.py), and so is a tensor that only adds to the output
    differentiated (a per-species energy shift); so is a layer its parent skipped at random
    in training while its siblings of its kind ran (LayerDrop: rules/layer_drop.py), and a
    candidate of an alike module list of which the step ran one, called by an index picked at
    run time (a one-shot supernet's sampled path: inspector/picked_choice.py); and, at one step
    of a script, a parameter no optimizer held then while one held others of its model: a
    phase that does not train it (DeeBERT's early exits, trained after their backbone). A
    parameter the explanation pass finds read only inside a torch.no_grad() region, in its
    own module's forward (or its parent's, as attention reads out_proj), is information:
    the block freezes it (rules/frozen_by_no_grad.py; wav2vec 2.0's feature encoder), and so
    is one its own module's forward reads only through .detach(), for another loss to train
    (rules/detached_by_owner.py; an entropy bottleneck's quantiles); so is
    the output of a stack's last block that no next block reads, its siblings' same
    parameter given a gradient (Conv-TasNet's last residual conv: rules/stack_tail.py)."""
    ran = {m.name for m in stats.modules if m.ran}
    routed = idle_experts(stats)
    out = []
    for p in trainable(stats):
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
                f"the loss: the graph is cut after it{UNUSED}"
            )
            later = LATER_STEP_ADVICE if stats.one_step_of_script else ""
            advice = CUT_ADVICE + UNUSED_ADVICE + later
        finding = this.finding(p.name, f"grad of {p.name} is None: {why}", advice)
        out.append(_by_design(stats, p, finding, p.module in ran))
    return out


def _by_design(stats: RunStats, p: ParamStats, finding: Finding, ran: bool) -> Finding:
    """The finding as information where the missing gradient is by design."""
    if not ran:
        finding = layer_drop.left_out_by_design(stats, finding, p.name, p.module)
    else:
        finding = _stack_tail(stats, p, finding)
    weight = _differentiated_bias(stats, p)
    if weight is not None:
        head = f"grad of {p.name} is None"
        finding = derivative_bias.as_information(finding, head, weight, "got one")
    elif p.derivative_offset and stats.loss_through_derivative:
        finding = derivative_bias.as_offset(finding, f"grad of {p.name} is None")
    return _not_this_phase(finding) if p.name in stats.untrained else finding


def _stack_tail(stats: RunStats, p: ParamStats, finding: Finding) -> Finding:
    """Information where it is the output of a stack's last block that no next block reads
    (Conv-TasNet's and WaveNet's last residual conv: rules/stack_tail.py)."""
    names = [q.name for q in stats.params]
    tail = stack_tail.last_of(names, names.index(p.name), lambda j: stats.params[j].has_grad)
    return finding if tail is None else stack_tail.as_information(finding, tail)


def _not_this_phase(finding: Finding) -> Finding:
    """At one step of a script no optimizer held the parameter, while one held others of
    its model: a phase that does not train it (DeeBERT's exits, trained after the backbone
    by an optimizer of their own). Information: the missing gradient is that phase's."""
    return replace(
        finding,
        severity=Severity.INFO,
        message=f"{finding.message}; no optimizer held it at this step, while one held other "
        "parameters of the model: this phase does not train it",
        advice="nothing to do if a later phase trains it (early exits trained after their "
        "backbone, a head after a warm-up); if it should train now, add it to the optimizer "
        "and make its output reach the loss",
    )


def _differentiated_bias(stats: RunStats, p: ParamStats) -> str | None:
    """The weight beside bias `p` when that weight got a gradient from a loss that reads the
    model through a derivative (rules/derivative_bias.py); None otherwise."""
    if not stats.loss_through_derivative:
        return None
    graded = {q.name for q in stats.params if q.has_grad}
    return shift_invariance.weight_among(p.name, p.shape, graded)


@rule(
    "GS102",
    "non-finite-loss",
    Severity.ERROR,
    "non-finite",
    Stage.RUN,
    "the loss is NaN or infinite",
    example="the log of an activation that a mask set to zero",
    fix=(
        "guard that op: clamp its input or add an epsilon (log, sqrt, division); in float16 keep "
        "the op in float32"
    ),
    command="gradscope inspect nan-loss",
)
def non_finite_loss(stats: RunStats, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """The loss value is NaN or infinite. The explanation pass replays the forward and names the
    first op that made a non-finite value out of finite inputs, with its module and line."""
    if stats.loss_finite:
        return []
    return [
        this.finding(
            "loss",
            f"the loss ({stats.loss_source}) is {num(stats.loss_value)}",
            "find the op that first produces a non-finite value (log/sqrt/div of zero, overflow "
            "in float16 or of a value a loop multiplies by a factor above 1) and guard it with a "
            "clamp or an epsilon, or keep that factor below 1",
            stats.loss_value,
        )
    ]


@rule(
    "GS103",
    "non-finite-grad",
    Severity.ERROR,
    "non-finite",
    Stage.RUN,
    "a gradient holds NaN or Inf",
    example="sqrt or log at 0 in the forward, whose derivative is infinite there",
    fix=(
        "guard the forward op whose derivative blows up (sqrt(x + eps), torch.where on the input "
        "rather than on the output); clip gradients if they merely overflow"
    ),
    command="gradscope inspect nan-loss",
)
def non_finite_grad(stats: RunStats, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """A parameter's gradient holds NaN or Inf: its L2 norm is non-finite (then that tensor is
    measured exactly). With a finite loss the backward itself divided by zero or overflowed; the
    explanation pass names the op (anomaly mode's backward node). With a non-finite loss the
    forward made it and the backward only carried it: clipping cannot help, the forward op
    (GS102's) is the one to fix."""
    where = "the loss is non-finite too" if not stats.loss_finite else "although the loss is finite"
    advice = (
        "a backward formula divides by zero or overflows (sqrt/log/pow near 0, x/x, masked "
        "infinities); guard the forward op or clip gradients"
        if stats.loss_finite
        else "the forward made the non-finite value and the backward carried it to every "
        "gradient it reached: fix the forward op named for the loss (non-finite-loss, GS102): a "
        "log/sqrt/division at 0, or a value that overflowed (a recurrence whose factor exceeds "
        "1, float16); clipping gradients cannot help"
    )
    return [
        this.finding(
            p.name,
            f"grad of {p.name} holds NaN/Inf (max |grad| = {num(p.grad_max)}); {where}",
            advice,
            p.grad_max,
        )
        for p in stats.params
        if p.has_grad and not p.finite
    ]
