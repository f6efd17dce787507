"""Parameters outside every optimizer (GS411): a layer the optimizer was built without, or
a copy kept by the algorithm (a target network, an EMA teacher) that no gradient should
reach. Told apart by whether gradients reach it and whether its values changed. No torch."""

from __future__ import annotations

from dataclasses import replace

from gradscope.config import Thresholds
from gradscope.findings import RULES, Finding, Rule, Severity
from gradscope.fmt import num
from gradscope.rules import (
    abandoned,
    assigned_after,
    bare_scalar,
    copy_through,
    in_backward,
    master_copies,
    masters,
    moved_by_script,
    plain_attribute,
    table_outside,
)
from gradscope.rules.copies_of import copy_of, started_apart, top, trained_shapes
from gradscope.rules.registry import DECLARED, Stage, rule
from gradscope.rules.step_common import no_backward, values_changed
from gradscope.rules.step_retired import fixed_above, retired_after, stopped_optimizers
from gradscope.rules.step_setup import got_grad
from gradscope.steps.records import ParamInfo, WatchRun


@rule(
    "GS411",
    "not-in-optimizer",
    Severity.ERROR,
    "update-ratio",
    Stage.WATCH,
    "watch: a trainable parameter gets gradients but is in no optimizer param group",
    example="a layer added to the model after the optimizer was built; a target network whose "
    "forward is not under torch.no_grad()",
    fix="a target, EMA or teacher copy: compute its forward under torch.no_grad() (or detach its "
    "output); a copy the loss is computed through while the network it mirrors gets no "
    "gradient: compute the loss with the network the optimizer steps; a network whose "
    "optimizer stopped stepping (a teacher trained first): requires_grad_(False); a fixed "
    "network the loss differentiates through (a perceptual loss's feature extractor): "
    "requires_grad_(False); a float16/bfloat16 model trained through float32 master weights "
    "kept by hand: copy the masters back into it after each step; a tensor the model keeps "
    "as a plain attribute: make it an "
    "nn.Parameter; anything else: build the optimizer after the model is complete, or add "
    "a param group for it",
    command="gradscope watch gradscope/examples/train_buggy.py",
    objectives=(
        "any: a parameter's place in the optimizers and whether it gets gradients, a "
        "mechanism independent of what the loss means"
    ),
    # a gate that started at 0 stays 0 outside the optimizer: what it multiplies gets
    # only zero gradients (rules/held_at_zero.py)
    explains=("GS413",),
)
def not_in_optimizer(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """A parameter that requires grad and gets gradients is in no param group of any optimizer
    that steps: no step applies them, and no optimizer's zero_grad() clears them (or only
    that of an optimizer whose step() never runs, which is named; not where the run ended
    early, a crash or --steps, after that optimizer's first zero_grad(): its step() may
    simply not have come yet, as a GAN's generator's does not when the discriminator's
    step crashed the first round). One that never gets a
    gradient (a target network, an EMA copy, a teacher: updated by copying weights, if at all)
    is information only: nothing is wrong with its gradients. Its norm at the first step and
    at the end (one read for the run) says which: values that changed were updated by copy,
    fine; values that never changed are updated by nothing (freeze it). One given gradients
    whose values changed, not a copy of a trained parameter, is moved by the script itself
    (a learned lr's inner loop written back; a Hebbian rule by hand, its gradients piling up
    unread): information too. One replaced by a new tensor (a
    densification's swap) that no backward reached since is not judged: the new one trains.
    One whose only optimizer stopped while the backward kept reaching it is a warning
    (rules/step_retired.py)."""
    if not run.optimizers:
        return []
    copies = trained_shapes(run)
    apart = started_apart(run, copies)
    stopped = stopped_optimizers(run)
    master = master_copies.stepped_copy(run, lambda i: got_grad(run, i))
    mastered = masters.mirrored(run)
    out: list[Finding] = []
    for i, p in enumerate(run.params):
        if i in mastered:
            out.extend(f for f in (masters.finding(run, p),) if f)
            continue
        if p.requires_grad and p.in_optimizer and (retired := retired_after(run, i, stopped)):
            out.append(_after_last_step(run, p, i, *retired))
            continue
        if _not_judged(run, i, p):
            continue
        copy = copy_of(p, copies)
        if (top(p.name), top(copy)) in apart:
            copy = ""  # the same architecture, initialised on its own: not a copy
        if not got_grad(run, i) and not (p.idle_optimizer and p.idle_cleared):
            out.append(_idle(run, p) if p.idle_optimizer else _no_grad_outside(run, p, copy))
            continue
        finding = _given_gradients(this, run, p, i, copy, master)
        if finding is not None:
            out.append(finding)
    return out


def _given_gradients(
    this: Rule, run: WatchRun, p: ParamInfo, i: int, copy: str, master: tuple[int, ...]
) -> Finding | None:
    """A parameter outside every stepping optimizer that got gradients: held by an
    optimizer that never stepped (dropped by the script: a trial abandoned; else named
    once the run completed), stepped through a copy of
    its values, moved by the script itself, a variable differentiated on its own, or the
    error."""
    if abandoned.dropped(p):
        return abandoned.finding(run, p)
    if p.idle_optimizer:
        if run.status == "completed" or p.idle_resets > 1:
            return _never_stepped(this, run, p, i)
        return None
    if master and p.in_model:
        return master_copies.finding(run, p, master)
    piled = _piled_up(run, i)
    if not copy and moved_by_script.moved(p, piled):
        return moved_by_script.finding(run, p, piled)
    if p.differentiated and not p.in_model:
        return _differentiated(run, p, i)
    return _outside(this, run, p, i, copy)


def _outside(this: Rule, run: WatchRun, p: ParamInfo, i: int, copy: str) -> Finding:
    """The error: gradients that no step applies (a copy of a trained parameter is named;
    one whose original got no gradient in any step is the one the loss reads instead)."""
    if p.assigned_over is not None:
        return assigned_after.finding(this, run, p, _piled_up(run, i))
    if copy and not _copy_learns(run, copy):
        return _loss_reads_copy(this, run, p, i, copy)
    if copy and copy_through.through(run, i):
        return copy_through.finding(run, p.name, copy, _piled_up(run, i))
    if p.plain_attribute:
        return plain_attribute.finding(this, run, p, _piled_up(run, i))
    if not copy and not p.stepped_by_hook and in_backward.optimizers_in_backward(run):
        return in_backward.hook_missing(this, run, p, _piled_up(run, i))
    layer = "" if copy else _trained_layer(run, p)
    scalar = "" if copy or layer else bare_scalar.advice(p) or table_outside.advice(p)
    advice = (
        f"{p.name} looks like a copy of {copy} (a target, EMA or teacher network): compute "
        "its forward under torch.no_grad() or .detach() its output; adding it to the "
        "optimizer would break the algorithm"
        if copy
        else f"{layer}, which holds it, has parameters the optimizer steps: the optimizer "
        "was built without this one (param groups split by hand, or it was added after); add "
        "it to a param group (with its own lr or weight_decay if it needs them)"
        if layer
        else "no backward ran in this run: the script writes this tensor's gradient by hand "
        "and no optimizer holds it; pass model.parameters() (or add a param group for it) to "
        "the optimizer"
        if no_backward(run)
        else scalar
        if scalar
        else "if it is a target, EMA or teacher copy, compute its forward under "
        "torch.no_grad() or .detach() its output; if it is a fixed network the loss "
        "differentiates through (a perceptual loss's feature extractor), freeze it with "
        "requires_grad_(False), as no_grad would cut the gradient to the model before it; "
        "only otherwise pass model.parameters() (or add a param group for it) to the "
        "optimizer"
    )
    return this.finding(
        p.name,
        f"{p.name} requires grad and gets gradients but is in no optimizer param "
        "group: no step applies them, and no optimizer's zero_grad() clears its .grad",
        advice,
        evidence=(f"optimizers: {', '.join(run.optimizers)}", *_piled_up(run, i)),
    )


def _trained_layer(run: WatchRun, p: ParamInfo) -> str:
    """`p`'s module, or the one holding it, when it holds a parameter an optimizer steps too
    (an S4 layer whose kernel's A and dt the groups left out); else "". A copy, a teacher,
    a fixed network is a module of its own, none of it stepped. A parameter of the model
    itself (a CRF's transitions, a cls token: a name with no dot, as the names of a run's
    only model are) whose model has stepped parameters is held by "the model"."""
    stepped = {q.name for q in run.params if q.in_optimizer}
    if "." not in p.name and p.in_model:
        model = any(q.in_model and q.in_optimizer for q in run.params)
        return "the model" if model else ""
    parts = p.name.split(".")[:-1]
    for end in range(len(parts), max(len(parts) - 2, 0), -1):
        prefix = ".".join(parts[:end]) + "."
        if any(name.startswith(prefix) for name in stepped):
            return prefix[:-1]
    return ""


def _copy_learns(run: WatchRun, original: str) -> bool:
    """Whether the trained parameter a copy mirrors got a gradient in some step."""
    return any(got_grad(run, j) for j, q in enumerate(run.params) if q.name == original)


def _loss_reads_copy(this: Rule, run: WatchRun, p: ParamInfo, i: int, copy: str) -> Finding:
    """The copy (an EMA, a target) gets the gradients and the network the optimizer steps,
    which it mirrors, got none in any step: the loss is computed through the copy, so
    the optimizer steps nothing and the copy only follows a network that never learns."""
    return this.finding(
        p.name,
        f"{p.name} gets gradients but is in no optimizer param group, while {copy}, which "
        "it mirrors and which the optimizer steps, got no gradient in any step: the loss is "
        "computed through the copy (a target, EMA or teacher network) instead of the network "
        "being trained",
        "compute the training loss with the network the optimizer steps; use the copy only "
        "where the algorithm reads it (targets, evaluation, sampling) under torch.no_grad()",
        evidence=(f"optimizers: {', '.join(run.optimizers)}", *_piled_up(run, i)),
    )


def _not_judged(run: WatchRun, i: int, p: ParamInfo) -> bool:
    """Not a weight left out: frozen, in an optimizer, an input made to require grad, or
    a tensor its optimizer (or model) replaced with a new one it trains."""
    return (
        not p.requires_grad
        or p.in_optimizer
        or p.one_step
        or _gone(run, i, p.replaced_after)
        or _stale(run, i)
    )


def _never_stepped(this: Rule, run: WatchRun, p: ParamInfo, i: int) -> Finding:
    """In the param groups of an optimizer whose zero_grad() ran and whose step() never
    did: the gradients it clears are never applied (its step() is missing). A gradient
    that grew while that zero_grad() ran again and again (gpytorch's NGD recipe with the
    hyperparameters' Adam step left out) grew with the model the other optimizers moved,
    not by piling up: only a reset at most once says nothing resets it."""
    return this.finding(
        p.name,
        f"{p.name} gets gradients and is in the param groups of an optimizer "
        f"({p.idle_optimizer}) {_never_ran(p)}: no step applies its gradients",
        f"call that optimizer's ({p.idle_optimizer}) step() after the backward, as the other "
        "optimizers' are",
        evidence=(
            f"optimizers that stepped: {', '.join(run.optimizers)}",
            *(_piled_up(run, i) if p.idle_resets <= 1 else ()),
        ),
    )


def _after_last_step(run: WatchRun, p: ParamInfo, i: int, k: int, last: int) -> Finding:
    """A warning: its only optimizer took its last step and the backward kept reaching it:
    no step applies those gradients (a teacher pretrained in the script, then called with
    gradients; a backbone left unfrozen when a head-only optimizer took over)."""
    finding = RULES["GS411"].finding(
        p.name,
        f"{p.name} got a gradient at every step after step {last}, the last step of its only "
        f"optimizer ({run.optimizer_label(k)}): the backward still differentiates through it "
        "and no step applies what it finds",
        "if it is to stay fixed from there on (a teacher, a frozen backbone), call "
        "requires_grad_(False) on it, or run its forward under torch.no_grad() where nothing "
        "must flow through it; if it is meant to keep learning, keep stepping its optimizer "
        "or add it to the one that steps",
        evidence=(f"optimizers: {', '.join(run.optimizers)}", *_piled_up(run, i)),
    )
    return fixed_above(run, p.name, i, last, finding)


def _differentiated(run: WatchRun, p: ParamInfo, i: int) -> Finding:
    """Information: a bare leaf, in no model, that the script differentiates against by
    torch.autograd.grad (IRMv1's dummy scale): the derivative it reads is its own, not .grad;
    what backward() adds to .grad is a by-product no step was meant to apply. A model's
    weight the script differentiates against (an unrolled inner loop's) is still a weight."""
    finding = RULES["GS411"].finding(
        p.name,
        f"{p.name} is in no optimizer param group and the script differentiates against it "
        "by torch.autograd.grad (a dummy scale, a probe): a variable of a derivative the "
        "script reads itself; each backward() of a loss holding that derivative also adds "
        "to its .grad, which nothing reads",
        "nothing to fix if it is not meant to train; making it afresh for each call (as "
        "IRMv1's reference penalty does) leaves no .grad behind; if it is meant to learn, add "
        "it to the optimizer",
        evidence=(f"optimizers: {', '.join(run.optimizers)}", *_piled_up(run, i)),
    )
    return replace(finding, severity=Severity.INFO)


def _no_grad_outside(run: WatchRun, p: ParamInfo, copy: str) -> Finding:
    """Information: outside every optimizer and never given a gradient; whether a copy
    changed its values where both its first and last norms were read. Changed values of a
    tensor that mirrors no trained one (`copy` empty) may be a copy's or the script's own
    update (a block trained by evolution strategies beside a backprop model): both named."""
    changed = values_changed(p)
    moved = (
        "updated by copy (a target, EMA or teacher)"
        if copy
        else "updated outside every optimizer (a target or EMA network copied into it, or an "
        "update rule of the script's own: evolution strategies or another gradient-free "
        "method training this block)"
    )
    what = {
        True: f"its values changed (norm {num(p.weight_norm)} at the first step, "
        f"{num(p.last_norm)} at the end): {moved}: fine",
        False: f"its values never changed (norm {num(p.weight_norm)} at the first step and at "
        "the end): nothing updates it",
        None: "a target, EMA or teacher copy updated by copying weights (whether its values "
        "changed is not recorded), or a layer nothing trains",
    }[changed]
    advice = {
        True: "nothing to do; requires_grad_(False) says a copy is not trained"
        if copy
        else "nothing to do; requires_grad_(False) says that no backward trains it",
        False: "if it is meant to stay fixed, freeze it (requires_grad_(False)); if it is a "
        "copy, the copy never ran in this run (its update interval may be longer than the "
        "run); if it is meant to learn, make the loss use it and add it to the optimizer",
        None: "nothing to do for a copy; for a layer meant to learn, make the loss use it and "
        "add it to the optimizer; requires_grad_(False) says a copy is not trained",
    }[changed]
    finding = RULES["GS411"].finding(
        p.name,
        f"{p.name} requires grad but is in no optimizer param group and got no gradient in "
        f"any step: {what}",
        advice,
        evidence=(f"optimizers: {', '.join(run.optimizers)}",),
    )
    return replace(finding, severity=Severity.INFO)


def _never_ran(p: ParamInfo) -> str:
    """What its optimizer did: zeroed and never stepped, or (found live when the run ended
    early) never reached."""
    if p.idle_zeroed:
        return "whose zero_grad() ran but whose step() never did"
    return "that had not stepped yet when the run ended"


def _idle(run: WatchRun, p: ParamInfo) -> Finding:
    """Information: in the param groups of an optimizer whose zero_grad() ran and whose
    step() never did, and never given a gradient (an optimizer kept for a later phase, or
    one whose loss never got to its backward before the script stopped)."""
    finding = RULES["GS411"].finding(
        p.name,
        f"{p.name} is in the param groups of an optimizer ({p.idle_optimizer}) "
        f"{_never_ran(p)}, and got no gradient in any step: nothing updated it in this run",
        f"if it is meant to learn, make its loss reach it and call that optimizer's "
        f"({p.idle_optimizer}) step() after the backward; if it is meant to stay fixed, "
        "freeze it (requires_grad_(False))",
        evidence=(f"optimizers that stepped: {', '.join(run.optimizers)}",),
    )
    return replace(finding, severity=Severity.INFO)


def _stale(run: WatchRun, i: int) -> bool:
    """Its gradient is the same nonzero tensor's at every recorded step: one backward
    before training reached it and none since (an input given requires_grad for a
    saliency map or an attack, kept alive), so no step's gradients go astray there."""
    norms = {r.param_norms[i] for r in run.steps if r.detail and i < len(r.param_norms)}
    return len(norms) == 1 and all(v is not None and v > 0 for v in norms) and len(run.steps) > 1


def _gone(run: WatchRun, i: int, replaced: int | None) -> bool:
    """Replaced by a new tensor after step `replaced`, and no backward reached it since:
    its gradient (None, or the last one, which no zero_grad clears now, until the watch
    lets the tensor go: None again) did not change after the step that took the new one.
    One the loss still reaches (the new tensor went to the optimizer, the old one stayed
    in the model) is a weight left out."""
    if replaced is None:
        return False
    after = {
        v
        for r in run.steps
        if r.detail and r.step > replaced + 1 and i < len(r.param_norms)
        if (v := r.param_norms[i]) is not None
    }
    return len(after) <= 1


def _piled_up(run: WatchRun, i: int) -> tuple[str, ...]:
    """Its gradient norm at the first and last recorded steps, when it grew: nothing resets it.
    None in a run with no backward: the script wrote each gradient, and growth is its own."""
    if no_backward(run):
        return ()
    norms = [
        (r.step, v)
        for r in run.steps
        if r.detail and i < len(r.param_norms) and (v := r.param_norms[i]) is not None
    ]
    if len(norms) < 2 or not norms[0][1] > 0 or norms[-1][1] < 2 * norms[0][1]:
        return ()
    (a, x), (b, y) = norms[0], norms[-1]
    return (
        f"its gradient norm grew from {num(x)} at step {a} to {num(y)} at step {b} "
        f"({y / x:.3g}×): each backward adds to a .grad nothing resets",
    )
