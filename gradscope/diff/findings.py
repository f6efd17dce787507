"""The diff's findings (GS601-GS606), each declared with `@rule` on the function that makes
it from a DiffResult (no torch)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gradscope import fmt
from gradscope.findings import RULES, Finding, Severity
from gradscope.rules.registry import Stage, rule

if TYPE_CHECKING:  # types only: gradscope/__init__ loads this module on every command
    from gradscope.diff.result import Delta, DiffResult, ModuleRow

GPT2_DIFF = "gradscope diff tests/diff/diff_targets.py:gpt2_ref tests/diff/diff_targets.py:"
"""A GPT-2 against ports of it with one bug each (the repository's test targets)."""


def size(d: Delta) -> str:
    if d.shape:
        return f"shapes differ ({d.shape})"
    tol = "bitwise" if d.tolerance.exact else f"rtol {d.tolerance.rtol:g}"
    return f"max abs {fmt.num(d.max_abs)}, rel {fmt.num(d.rel)} ({d.dtype}, {tol})"


def of(result: DiffResult) -> list[Finding]:
    """Where the models first differ (an output, else a gradient), then what makes the
    comparison noisy or partial."""
    if result.origin is not None:
        out = [output_differs(result, result.modules[result.origin])]
    else:
        out = grad_differs(result)
    return (
        out + randomness(result) + transposed(result) + shape_mismatch(result) + unmatched(result)
    )


@rule(
    "GS602",
    "grad-differs",
    Severity.ERROR,
    "port",
    Stage.DIFF,
    "diff: every output agrees but a gradient differs",
    example=(
        "a custom autograd Function, a detach, a hook or a straight-through trick in one model; "
        "or a setting (--b-autocast bf16) that changes a gradient"
    ),
    fix=(
        "check the backward of the module that owns the gradient; under a setting, keep that "
        "module in float32 or loosen --rtol knowingly"
    ),
    objectives=(
        "any: two models compared with each other on the same batch and loss; what the loss "
        "means does not enter"
    ),
)
def grad_differs(result: DiffResult) -> list[Finding]:
    """Every module output agrees within tolerance but a parameter's gradient differs: a backward
    differs."""
    if result.first_grad is None:
        return []
    p = result.params[result.first_grad]
    assert p.grad is not None
    return [
        RULES["GS602"].finding(
            p.new,
            f"every module output agrees but the gradient of {p.new} differs from the "
            f"reference's {p.ref}: {size(p.grad)}",
            (
                f"{result.setting} changes this gradient beyond tolerance: keep its module "
                "in float32 (autocast(enabled=False)), or loosen --rtol knowingly"
                if result.setting
                else "a backward differs (a custom autograd Function, a detach, a hook, or "
                "a straight-through trick): check the backward of the module that owns it"
            ),
            p.grad.max_abs,
            p.grad.tolerance.rtol,
        )
    ]


@rule(
    "GS604",
    "transposed-match",
    Severity.WARNING,
    "port",
    Stage.DIFF,
    "diff: a weight matched the other model's only with its shape reversed",
    example="GPT-2's Conv1D (in, out) weights against nn.Linear (out, in)",
    fix="transpose it when loading it into the port",
    objectives=(
        "any: two models compared with each other on the same batch and loss; what the loss "
        "means does not enter"
    ),
)
def transposed(result: DiffResult) -> list[Finding]:
    """A weight pairs with the other model's only with its shape reversed; it is not copied
    unless --allow-transposed."""
    out = []
    for r, n in result.alignment.transposed:
        copied = any(p.ref == r and p.copied for p in result.params)
        out.append(
            RULES["GS604"].finding(
                n,
                f"{n} matches the reference's {r} only with its shape reversed "
                f"({'copied transposed' if copied else 'not copied'})",
                "a Conv1D (in, out) weight against an nn.Linear (out, in) one: transpose it "
                "when you load it"
                + ("" if copied else "; --allow-transposed compares with it copied transposed"),
            )
        )
    return out


@rule(
    "GS605",
    "shape-mismatch",
    Severity.WARNING,
    "port",
    Stage.DIFF,
    "diff: same name, incompatible shapes: not copied",
    example="a port built with another hidden size or vocabulary",
    fix="build the port with the reference's dimensions (hidden size, heads, vocabulary)",
    objectives=(
        "any: two models compared with each other on the same batch and loss; what the loss "
        "means does not enter"
    ),
)
def shape_mismatch(result: DiffResult) -> list[Finding]:
    """Two parameters share a name but their shapes are incompatible, so the weight is not
    copied."""
    return [
        RULES["GS605"].finding(
            n,
            f"{n} and the reference's {r} have incompatible shapes ({shapes}): not copied",
            "check the dimensions the port was built with (hidden size, heads, vocabulary)",
        )
        for r, n, shapes in result.alignment.mismatched
    ]


@rule(
    "GS606",
    "unmatched",
    Severity.INFO,
    "port",
    Stage.DIFF,
    "diff: parameters with no counterpart in the other model",
    example="a port that names its layers blocks.N where the reference says h.N",
    fix=(
        'pair renamed parameters with --name-map FILE ("ref_name" = "new_name"; a key ending '
        "in '.' renames a prefix)"
    ),
    objectives=(
        "any: two models compared with each other on the same batch and loss; what the loss "
        "means does not enter"
    ),
)
def unmatched(result: DiffResult) -> list[Finding]:
    """Parameters with no counterpart in the other model after pairing by name (wrapper prefixes
    such as module. and _orig_mod. are found by themselves)."""
    a = result.alignment
    if not (a.ref_only or a.new_only):
        return []
    return [
        RULES["GS606"].finding(
            "parameters",
            f"{len(a.ref_only)} reference parameter(s) and {len(a.new_only)} new one(s) "
            "have no counterpart: " + fmt.clip(", ".join((*a.ref_only, *a.new_only)), 120),
            'pair renamed ones with --name-map FILE ("ref_name" = "new_name"; a key '
            "ending in '.' renames a prefix)",
        )
    ]


@rule(
    "GS601",
    "output-differs",
    Severity.ERROR,
    "port",
    Stage.DIFF,
    "diff: the first module whose output differs while its inputs agree",
    example="a GPT-2 port whose block 1 forgets a residual",
    fix=(
        "compare that module's forward line by line with the reference's: eps, activation "
        "variant, weight layout, scaling, residuals, dropout, dtypes"
    ),
    command=GPT2_DIFF + "gpt2_port_residual",
    objectives=(
        "any: two models compared with each other on the same batch and loss; what the loss "
        "means does not enter"
    ),
)
def output_differs(result: DiffResult, row: ModuleRow) -> Finding:
    """Walking the module calls in execution order, the first whose output differs from the
    reference's beyond the dtype's tolerance while its inputs agree: the difference starts inside
    that module's forward (the first differing submodule input narrows it further)."""
    assert row.output is not None
    inner = result.modules[result.first_input] if result.first_input is not None else None
    evidence = []
    if row.settings:
        evidence.append(f"settings differ: {row.settings}")
    if row.new_made:
        evidence.append(f"new, created at {row.new_made}")
    if row.new_where:
        evidence.append(f"new, forward at {row.new_where}")
    if row.ref_made:
        evidence.append(f"reference, created at {row.ref_made}")
    if row.ref_where:
        evidence.append(f"reference, forward at {row.ref_where}")
    if inner is not None:
        evidence.append(
            f"inside it, the first submodule whose input differs is {inner.new or inner.ref}: "
            "the difference arises in its own forward, before that call"
        )
    evidence += _square_hint(result, row)
    inputs = "its inputs agree" if row.inputs is not None else "it takes no tensor input"
    name = row.new if row.new is not None else row.ref
    return RULES["GS601"].finding(
        name + ("" if row.call == 0 else f" (call {row.call + 1})"),
        f"the output of {name} ({row.kind}) differs from the reference's: {size(row.output)}; "
        f"{inputs}, so the difference starts here",
        "compare this module's forward line by line with the reference's: eps, activation "
        "variant, weight layout, scaling, residuals, dropout, dtypes",
        row.output.max_abs,
        row.output.tolerance.rtol,
        tuple(evidence),
    )


def _square_hint(result: DiffResult, row: ModuleRow) -> list[str]:
    """GPT-2's classic: non-square Conv1D weights show up as transposed pairs, square ones
    cannot (their shape is the same either way) and were copied as they are."""
    if not result.alignment.transposed:
        return []
    square = [
        p.new
        for p in result.params
        if p.ref.rpartition(".")[0] == row.ref
        and len(p.shape) == 2
        and p.shape[0] == p.shape[1]
        and p.how != "transposed"
    ]
    if not square:
        return []
    return [
        f"{', '.join(square)} is square and was copied as it is, while "
        f"{len(result.alignment.transposed)} other weight(s) paired only transposed: "
        "it may need transposing too (Conv1D (in, out) against Linear (out, in))"
    ]


@rule(
    "GS603",
    "randomness",
    Severity.WARNING,
    "port",
    Stage.DIFF,
    "diff: a module's output changes with the seed (dropout left on?)",
    example="attention dropout with training=True in the port",
    fix="compare in eval mode (model.eval()), or find the functional dropout with training=True",
    command=GPT2_DIFF + "gpt2_port_dropout",
    objectives=(
        "any: two models compared with each other on the same batch and loss; what the loss "
        "means does not enter"
    ),
)
def randomness(result: DiffResult) -> list[Finding]:
    """A module's output changes with the seed (each model's forward is repeated with another
    seed): randomness such as dropout is active there, so the comparison is noise."""
    out = []
    for side, flag in (("reference", "ref_random"), ("new model", "new_random")):
        first = next((r for r in result.modules if getattr(r, flag)), None)
        if first is None:
            continue
        name = first.ref if side == "reference" else (first.new or first.ref)
        if side == "reference":
            message = (
                f"the reference's own output at {name} changes with the seed: the comparison is "
                "noise-limited there (dropout or other randomness is active in training mode)"
            )
            advice = "compare both in eval mode (model.eval()), or with dropout p=0"
        else:
            ref_too = first.ref_random
            message = (
                f"the new model's output at {name} changes with the seed"
                + (" (so does the reference's)" if ref_too else ", the reference's does not")
                + ": randomness (dropout) is active there"
            )
            advice = (
                "compare both in eval mode"
                if ref_too
                else "dropout left on? a functional dropout with training=True, or a submodule "
                "left in training mode"
            )
        out.append(RULES["GS603"].finding(name, message, advice))
    return out
