"""The findings of a diff of two runs (GS607-GS609), each declared with `@rule` on the
function that makes it from a RunsDiff."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from gradscope import fmt
from gradscope.findings import RULES, Finding, Severity
from gradscope.rules.registry import Stage, rule

if TYPE_CHECKING:  # types only: gradscope/__init__ loads this module on every command
    from gradscope.diff.runs.result import Gap, RunsDiff


def gap_text(g: Gap) -> str:
    if g.ref_value is None or g.new_value is None:
        side = "the reference" if g.new_value is None else "the new run"
        return f"only {side} has a gradient ({fmt.num(g.ref_value)} vs {fmt.num(g.new_value)})"
    return f"{fmt.num(g.ref_value, 6)} vs {fmt.num(g.new_value, 6)} (rel {fmt.num(g.rel)})"


def of(result: RunsDiff) -> list[Finding]:
    return [
        *(runs_diverge(result, d.optimizer) for d in result.divergences),
        *did_not_train(result),
        *misaligned(result),
    ]


@rule(
    "GS608",
    "run-did-not-train",
    Severity.ERROR,
    "runs",
    Stage.DIFF,
    "diff of two runs: a run whose weights never moved or whose loss did not fall, whether or not "
    "the two runs agree",
    example=(
        "a run with lr=0 that matches, within a loose tolerance, a reference whose loss barely "
        "moves"
    ),
    fix=(
        "check the learning rate and that step() updates the model the loss is computed on; a "
        'loss not meant to fall (a converged checkpoint): ignore = ["GS608:*"]'
    ),
    objectives=(
        "any whose loss should fall, by its logged values: each run judged by itself; a loss "
        "not meant to fall (a converged checkpoint, an objective that rises as it learns) "
        'is for ignore = ["GS608:*"]'
    ),
)
def did_not_train(result: RunsDiff) -> list[Finding]:
    """Each run judged by itself, whatever the comparison says: its weights never moved (update
    norm 0 at every sampled step, or a learning rate of 0 throughout), or its median loss over
    the last steps is less than 5% below where it started (judged from 20 logged losses, and not
    with several optimizers). An error when the weights never moved, or when a positive loss
    ended 10x or more above its first value (it blew up: the message says where it started and
    where it went); a warning when the weights moved and the loss stayed (a converged checkpoint
    fine-tuned further)."""
    out = []
    for t in result.training:
        if t.trained is not False:
            continue
        run = result.ref_label if t.run == "ref" else result.new_label
        advice = (
            "agreement with the other run says nothing about learning: check the learning rate "
            "and that step() updates the model the loss is computed on (a loss not meant to "
            'fall, as a converged checkpoint\'s, is fine: ignore = ["GS608:*"] in the config)'
        )
        if t.blew_up:
            advice = (
                "the run diverged: lower the learning rate, add warm-up or gradient clipping, "
                "and find the first bad step with `gradscope watch` (GS401, GS414)"
            )
        found = RULES["GS608"].finding(
            f"{t.run} ({run})" + (f", optimizer {t.optimizer}" if t.optimizer else ""),
            f"the {'reference' if t.run == 'ref' else 'new'} run did not train: {t.why}",
            advice,
            t.fall,
        )
        # weights that never moved, or a loss that blew up, are an error; weights that
        # moved while the loss stayed (a converged checkpoint fine-tuned further) a warning
        error = t.moved is False or t.blew_up
        out.append(found if error else replace(found, severity=Severity.WARNING))
    return out


@rule(
    "GS607",
    "runs-diverge",
    Severity.ERROR,
    "runs",
    Stage.DIFF,
    "diff of two runs: the first step where the loss or a gradient norm differs beyond the "
    "tolerance",
    example=(
        "the same script run with another learning rate from step 20, another seed, another data "
        "order or a frozen layer"
    ),
    fix=(
        "compare what the two runs did differently before that step; for runs meant to be "
        "identical, a non-deterministic kernel: torch.use_deterministic_algorithms(True)"
    ),
    objectives=(
        "any: two runs compared with each other step by step; what the loss means does not enter"
    ),
)
def runs_diverge(result: RunsDiff, optimizer: int) -> Finding:
    """Two watch --log runs, steps paired by number: the first step where the loss, the total
    gradient norm or a parameter's gradient norm differs from the reference's beyond |a-b| <=
    atol + rtol*|a| (rtol by dtype: 1e-4 float32, 1.6e-1 bfloat16; bitwise with --exact). The
    parameters that part first are ranked, and the gap's growth after it is measured."""
    d = next(x for x in result.divergences if x.optimizer == optimizer)
    top = d.gaps[0]
    params = [g for g in d.gaps if g.subject not in ("loss", "grad_norm")]
    evidence = [f"{g.new}: {gap_text(g)}" for g in d.gaps[:3]]
    lr = result.lr_differs
    if lr is not None and lr[0] == optimizer and lr[1] <= d.step:
        evidence.append(
            f"the learning rates differ from step {lr[1]}: "
            f"{', '.join(map(fmt.num, lr[2]))} vs {', '.join(map(fmt.num, lr[3]))}"
        )
    growth = [g for g in result.growth if g.factor is not None and g.step > d.step]
    if growth:
        g = growth[-1]
        evidence.append(f"by step {g.step} the gap is ×{fmt.num(g.factor)} its first size")
    who = f"{len(params)} parameter(s), first {params[0].new}" if params else top.subject
    return RULES["GS607"].finding(
        params[0].new if params else top.subject,
        f"the runs part at step {d.step}"
        + (f" (optimizer {optimizer})" if optimizer else "")
        + f": {who}; {top.new} {gap_text(top)}",
        "compare what the two runs did differently before this step (learning rate, seed, "
        "data order, a layer); for identical settings, a non-deterministic kernel: "
        "torch.use_deterministic_algorithms(True) in both",
        top.rel,
        result.tolerance.rtol,
        tuple(evidence),
    )


@rule(
    "GS609",
    "runs-misaligned",
    Severity.INFO,
    "runs",
    Stage.DIFF,
    "diff of two runs: steps or parameters only one run logged (different lengths, intervals or "
    "names)",
    example="a run stopped at step 40 against one of 60 steps",
    fix=(
        'nothing for lengths; pair renamed parameters with --name-map FILE ("ref_name" = '
        '"new_name")'
    ),
    objectives=(
        "any: two runs compared with each other step by step; what the loss means does not enter"
    ),
)
def misaligned(result: RunsDiff) -> list[Finding]:
    """Steps or parameters only one of the two runs logged: runs of different lengths (the common
    steps are compared), other logging intervals, names that do not pair."""
    out = []
    ref, new = result.lengths["ref"], result.lengths["new"]
    if ref != new or result.intervals["ref"] != result.intervals["new"]:
        out.append(
            RULES["GS609"].finding(
                "steps",
                f"the runs logged different steps (reference {_steps(ref)} to step "
                f"{result.last_steps['ref']}, new {_steps(new)} to step "
                f"{result.last_steps['new']}): {sum(result.common.values())} in both compared",
                "nothing to do when one run was stopped early or logged at another interval",
            )
        )
    if result.ref_only or result.new_only:
        names = fmt.clip(", ".join((*result.ref_only, *result.new_only)), 120)
        out.append(
            RULES["GS609"].finding(
                "parameters",
                f"{len(result.ref_only)} reference parameter(s) and {len(result.new_only)} new "
                f"one(s) have no counterpart: {names}",
                'pair renamed ones with --name-map FILE ("ref_name" = "new_name"; a key '
                "ending in '.' renames a prefix)",
            )
        )
    return out


def _steps(lengths: dict[int, int]) -> str:
    return " + ".join(str(n) for n in lengths.values()) + " steps"
