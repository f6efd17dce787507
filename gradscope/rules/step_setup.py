"""Verdicts about how a run is set up (GS409-GS413): update/weight ratios, optimizer
membership, gradients not reset, parameters never updated. Each optimizer's steps are
judged on their own; clipping is step_clipping.py's, mixed precision step_amp.py's. No torch."""

from __future__ import annotations

import statistics

from gradscope.config import Thresholds
from gradscope.findings import Finding, Rule, Severity, Threshold
from gradscope.fmt import num
from gradscope.rules import (
    below_eps,
    built_for_one_step,
    derivative_bias,
    dropped_grad,
    frozen_by_no_grad,
    hetero_tail,
    library_unused,
    moved_by_copy,
    past_read_out,
    plain_derivative,
    routed,
    shift_invariance,
    stack_tail,
    switched_off,
    unreturned_grad,
    zero_derivative,
    zero_in_graph,
    zero_input,
    zero_start,
)
from gradscope.rules.registry import DECLARED, Stage, rule
from gradscope.rules.step_common import (
    about,
    by_optimizer,
    finite,
    live,
    no_backward,
    values_changed,
)
from gradscope.rules.step_dead import dead_from
from gradscope.rules.symptoms import DIVERGENCE
from gradscope.rules.update_ratios import had_lr, judged_ratios
from gradscope.steps.records import ParamInfo, StepRecord, WatchRun


def got_grad(run: WatchRun, i: int) -> bool:
    """A step that updated gave it a gradient (not None, not zeros): over every step,
    from the run's running per-tensor facts."""
    return run.tensors.got_grad(i)


def _died(run: WatchRun, i: int) -> bool:
    """Its gradients fell a thousandfold and stayed there, in its optimizer's steps."""
    series = next((s for s in by_optimizer(run) if i in s.members), None)
    return series is not None and dead_from(series.steps, i) is not None


@rule(
    "GS409",
    "update-ratio-high",
    Severity.WARNING,
    "update-ratio",
    Stage.WATCH,
    "watch: a parameter's update is a large fraction of its weights every step",
    example="one param group with a learning rate 100 times the others'",
    fix="lower that param group's learning rate",
    thresholds=(
        Threshold(
            "update-ratio-high",
            0.2,
            "a weight matrix's median ‖Δw‖/‖w‖ per step (sampled, after warm-up) above this",
        ),
        "warmup-steps",
    ),
    objectives=(
        "any: each update against its weights, the optimizer's step, a mechanism "
        "independent of what the loss means"
    ),
)
def update_ratio_high(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    # weight matrices only: a bias or norm scale near 0 has a huge ratio while healthy
    """A weight matrix's median update/weight norm ratio, sampled every 25 steps after
    warmup-steps, is above update-ratio-high; about 1e-3 is healthy. Vectors (biases, norm
    scales near 0) are not judged, nor an input the script optimises beside a fixed network
    (an image, a soft prompt: its values are data, not weights) or a grid grid_sample
    interpolates (a voxel grid, a feature plane: the stored signal), nor the steps of an
    optimizer built for one task or round (a meta-learning inner loop, a federated client: 2
    to fewer than warmup-steps steps inside a longer run), whose large moves are its
    purpose."""
    out = []
    for i, ratio, matrix in judged_ratios(run, t):
        p = run.params[i]
        if ratio > t.update_ratio_high and matrix:
            out.append(
                this.finding(
                    p.name,
                    f"each update moves {p.name} by {ratio:.3g} of its norm (median over "
                    "sampled steps); about 1e-3 is healthy",
                    f"lower its param group's learning rate (now {num(p.lr)})",
                    value=ratio,
                    threshold=t.update_ratio_high,
                )
            )
    return out


@rule(
    "GS410",
    "update-ratio-low",
    Severity.WARNING,
    "update-ratio",
    Stage.WATCH,
    "watch: a parameter's update is zero or negligible (lr 0, frozen)",
    example="a param group with lr=0, or a learning-rate schedule that decayed to 0",
    fix="give it a learning rate, or remove it from the optimizer if it is meant to stay fixed",
    thresholds=(
        Threshold(
            "update-ratio-low",
            1e-7,
            "a parameter's median ‖Δw‖/‖w‖ below this (exactly 0: it is not updated)",
        ),
        "warmup-steps",
    ),
    objectives=(
        "any: each update against its weights, the optimizer's step, a mechanism "
        "independent of what the loss means"
    ),
)
def update_ratio_low(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    # exactly 0 for any parameter; small only where it had gradients (no gradient is
    # GS405/GS413's verdict, not the learning rate's)
    """After warmup-steps, a parameter's median sampled update/weight ratio is below
    update-ratio-low: zero for any parameter, or tiny for a matrix that had gradients. Its param
    group's learning rate is 0 at its steps, or far too small; a frozen parameter left in an
    optimizer is information. A parameter that gets a gradient at some steps only (a
    supernet's sampled path) is judged over those, and a schedule's 0 read after its last
    update is no learning rate of 0. A parameter whose gradients died (a thousandfold below
    what they were, and stayed there) is not judged: a ratio of ~0 with no gradient is not
    a small learning rate (GS405, GS417, and GS419 where large steps killed them). Weights
    stored in bfloat16 or float16 are named by their dtype: each step below the spacing of
    their values rounds back to the weight, whatever the learning rate (pure half-precision
    training)."""
    out = []
    for i, ratio, matrix in judged_ratios(run, t):
        p = run.params[i]
        if ratio > t.update_ratio_high and matrix:
            continue  # GS409's
        if not (ratio < t.update_ratio_low and (ratio == 0 or matrix)):
            continue
        if not p.requires_grad:
            continue  # frozen but in an optimizer: GS421 says it
        if not got_grad(run, i):
            continue  # GS413 says it (its lr, read at the end, may be a schedule's last 0)
        if not had_lr(run, t, i):
            why = "its param group's learning rate is 0"
        elif _died(run, i):
            continue  # a ratio ~0 with no gradient left is not a small lr: GS405/GS417's
        elif p.dtype in SIGNIFICANT_BITS:
            out.append(_rounded_away(this, p, ratio, t))
            continue
        else:
            why = "its learning rate is far too small for its gradients"
        finding = this.finding(
            p.name,
            f"{p.name} is {'not updated' if ratio == 0 else 'barely updated'} "
            f"(update/weight ratio {ratio:.3g}): {why}",
            "give it a learning rate, or remove it from the optimizer if it is meant to stay fixed",
            value=ratio,
            threshold=t.update_ratio_low,
        )
        out.append(below_eps.told(run, t, i, finding))
    return out


SIGNIFICANT_BITS = {"bfloat16": 8, "float16": 11}
"""Significant bits of the half-precision dtypes: a step below a weight's size over
2**bits rounds back to the weight."""


def _rounded_away(this: Rule, p: ParamInfo, ratio: float, t: Thresholds) -> Finding:
    """GS410 for weights stored in half precision: with gradients and a learning rate, an
    update that does not show is one each step's rounding takes back, whatever the lr's
    size against the gradients (pure bfloat16 training's stall)."""
    bits = SIGNIFICANT_BITS[p.dtype]
    return this.finding(
        p.name,
        f"{p.name} is {'not updated' if ratio == 0 else 'barely updated'} (update/weight "
        f"ratio {ratio:.3g}) although it gets gradients and a learning rate of {num(p.lr)}: "
        f"its weights are {p.dtype}, which keeps {bits} significant bits, so a step smaller "
        f"than about 1/{2**bits} of a weight rounds back to the weight before it",
        "keep the weights in float32 and compute in "
        f"{p.dtype} under torch.autocast (the optimizer then steps float32 weights), or "
        "use an optimizer that carries the rounding error (Kahan summation, stochastic "
        "rounding); a larger learning rate still loses every step below that size",
        value=ratio,
        threshold=t.update_ratio_low,
    )


@rule(
    "GS413",
    "never-updated",
    Severity.WARNING,
    "none-grad",
    Stage.WATCH,
    "watch: a parameter that requires grad got no (or only zero) gradient all run",
    example="an auxiliary head whose output is not added to the loss",
    fix="make it take part in the loss (`gradscope inspect --script train.py` shows where the "
    "graph is cut), or freeze and drop it",
    objectives=(
        "any: which parameters get gradients, not the loss's value; a head after a "
        "forward hook's read-out (a self-supervised wrapper's) is information by design"
    ),
    # a large share never learning stalls the loss at a level the few that learn cannot
    # lower, and their updates are large against their weights: not an lr too high
    explains=("GS414", "GS415", "GS419"),
)
def never_updated(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """A parameter that requires grad and is in an optimizer got no gradient (None) or only zero
    gradients in every step of the run: it never learns. Where the mechanism is known the
    finding names it, as information where training is as meant: a head after a
    representation a forward hook reads (BYOL's wrappers); a bias the loss is blind to, its
    outputs subtracted or normalised after it (shift_invariance.py); a bias a loss on a
    derivative cannot reach (derivative_bias.py); a copy the script moves itself, an EMA
    teacher (moved_by_copy.py); a .grad set to None before the step (dropped_grad.py); a
    module run only under torch.no_grad() (frozen_by_no_grad.py); zeros below torch.sign or
    round or the user's custom Function (zero_derivative.py); a hyper-parameter taken by
    torch.autograd.grad without create_graph (plain_derivative.py); a KL under its
    free-nats floor (switched_off.py); a zero start (zero_start.py); a router or a dead
    expert (routed.py); a stack's last block (stack_tail.py); a heterogeneous graph's
    unread node type (hetero_tail.py); a module an installed library built and never
    called, MONAI's TransformerBlock's norm_cross_attn, or whose output a library's model
    drops, BertModel's pooler under sentence-transformers, or reads only as a number,
    normflows' iResBlock's geom_p (library_unused.py); values a parameter store replaces at
    every step, each stepped once by an optimizer built for it (Pyro's decaying-average
    baseline: built_for_one_step.py), told once."""
    stepped = live(run)
    if not stepped:
        return []
    out: list[Finding] = []
    once: list[str] = []
    places = routed.routed(run)
    for i, p in enumerate(run.params):
        if not p.requires_grad or not p.in_optimizer or got_grad(run, i):
            continue
        none = not run.tensors.ever_had_grad(i)
        steps = len(_own_steps(run, stepped, i))
        finding = this.finding(
            p.name,
            f"{p.name} got {'no gradient (None)' if none else 'only zero gradients'} "
            f"in all {steps} steps: it never learns",
            zero_in_graph.advice(none, no_backward(run), held=p.model is not None),
        )
        out.append(_explained(run, i, finding, none, steps, places.get(i)))
        if none and steps == 1 and built_for_one_step.built_for_one_step(run, i):
            once.append(p.name)
    return built_for_one_step.told_once(out, once)


def _own_steps(run: WatchRun, stepped: list[StepRecord], i: int) -> list[StepRecord]:
    """The steps of the optimizers that hold parameter i (LfF's biased model and its
    debiased twin each step their own): the steps it could have learned at; all of them
    where no optimizer's members were recorded."""
    mine = [r for r in stepped if i in run.members_of(r.optimizer)]
    return mine or stepped


def _explained(
    run: WatchRun, i: int, finding: Finding, none: bool, steps: int, place: routed.Routed | None
) -> Finding:
    """GS413's finding, told as what explains it where something does: a copy moved by the
    script, a mixture's router or expert (`place`), a bias blind to its loss, a
    zero-derivative op, a stack's last block's output, a head past a read-out, an inner
    derivative taken without create_graph."""
    p = run.params[i]
    weight = None if none else shift_invariance.cancelled(run, i)
    read_through = derivative_bias.as_told(run, i, finding, steps) if none else None
    if none and values_changed(p):
        finding = moved_by_copy.as_information(finding, p, steps)
    elif none and i in run.state_facts.dropped:
        finding = dropped_grad.as_told(finding, p.name, steps)
    elif none and (p.no_grad_function or p.rerun_by):
        finding = unreturned_grad.by_function(finding, p)
    elif none and p.no_grad_forwards:
        finding = frozen_by_no_grad.as_told(run, i, finding, got_grad)
    elif none and (p.uncalled_in or p.dropped_in or p.read_as_number):
        finding = library_unused.as_information(finding, p)
    elif place is not None:
        finding = routed.if_unrouted(run, place, finding, f"{p.name} never learned")
    elif read_through is not None:
        finding = read_through
    elif weight is not None:
        finding = shift_invariance.as_information(
            finding, f"{p.name} got only zero gradients in all {steps} steps", weight
        )
    elif not none and p.flat_op is not None:
        finding = zero_derivative.as_flat(finding, p, steps)
    elif not none and p.clamped_off:
        finding = switched_off.as_held_at_floor(finding, p.name, steps)
    elif none and zero_derivative.below_custom(p):
        finding = zero_derivative.as_none(finding, p, steps)
    elif none and (tail := stack_tail.last_block_output(run, i, got_grad)) is not None:
        finding = stack_tail.as_information(finding, tail)
    elif none and (unread := hetero_tail.unread_node_type(run, i, got_grad)) is not None:
        finding = hetero_tail.as_information(finding, unread)
    elif not none and zero_start.started_at_zero(p):
        finding = zero_start.as_zero_start(finding, p, steps)
    elif not none and steps == 1 and (zero := zero_start.zero_layer_stepped(run, got_grad)):
        finding = zero_start.as_behind_zero_layer(finding, p, zero)
    elif not none and (bias := zero_input.learned_bias(run, i, got_grad)) is not None:
        finding = zero_input.as_information(finding, p.name, bias, steps)
    elif p.past_read_out:
        finding = past_read_out.as_information(finding, p.past_read_out)
    elif none and p.plain_derivative:
        finding = plain_derivative.as_told(finding, p, steps)
    return finding


# -- GS412 -----------------------------------------------------------------------------
@rule(
    "GS412",
    "grads-not-reset",
    Severity.ERROR,
    "not-reset",
    Stage.WATCH,
    "watch: gradients from the previous step were still there at the next backward",
    example="a loop that calls loss.backward() and opt.step() but never opt.zero_grad()",
    fix="call optimizer.zero_grad() once per optimizer step, after step() or before the first "
    "backward",
    thresholds=(
        Threshold(
            "not-reset-fraction",
            0.5,
            "gradients still present from the previous step at more than this fraction of the "
            "steps",
        ),
    ),
    supersedes=("GS419",),  # piled-up gradients make the large steps, not the lr
    objectives=(
        "any: whether .grad is reset between steps, a mechanism independent of what the loss means"
    ),
    explains=DIVERGENCE,
)
def grads_not_reset(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """At more than not-reset-fraction of the steps (4 at least), the previous step's gradients
    were still in .grad when the next backward ran. The number of backward calls per step tells
    a missing zero_grad from deliberate gradient accumulation that forgets to reset after its
    step."""
    # Per optimizer: carried_norm > 0 means its own gradients were not reset since its previous
    # step (a GAN's D and G each zero their own). Judged on the steps whose gradients were
    # finite: a NaN gradient's carried norm cannot be told from none, and piled-up gradients are
    # what makes a run without zero_grad overflow.
    out = []
    for series in by_optimizer(run):
        steps = [r for r in series.steps[1:] if finite(r.grad_norm)]
        if len(steps) < 4:
            continue
        carried = [r for r in steps if r.carried_norm is not None and r.carried_norm > 0]
        share = len(carried) / len(steps)
        if share <= t.not_reset_fraction:
            continue
        calls = statistics.median(r.backward_calls for r in steps)
        how = (
            "nothing resets them between updates by hand (model.zero_grad() is missing)"
            if series.manual(run)
            else "optimizer.zero_grad() is missing"
            if calls <= 1
            else f"with {calls:g} backward calls per step (accumulation) the gradients are "
            "still not reset after the step"
        )
        example = carried[len(carried) // 2]
        finding = this.finding(
            series.subject("gradients"),
            series.say(
                f"at {len(carried)} of {len(steps)} steps the previous step's gradients "
                f"were still in .grad when backward ran: {how}"
            ),
            "call optimizer.zero_grad() (or model.zero_grad()) once per optimizer step, "
            "after step() or before the first backward",
            value=share,
            threshold=t.not_reset_fraction,
            evidence=(
                f"first carried into step {carried[0].step}; each backward since adds to a "
                ".grad nobody cleared",
                f"step {example.step}: carried-over norm {num(example.carried_norm)}, "
                f"norm at the step {num(example.grad_norm)}",
            ),
        )
        out.append(about(finding, (r.step for r in carried)))
    return out
