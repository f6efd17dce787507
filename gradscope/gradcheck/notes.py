"""Warnings around a gradcheck (precision, in-place writes, outputs without grad) and the
meaning of the errors torch raises when a backward breaks its contract."""

from __future__ import annotations

import inspect
import os
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.autograd.function import FunctionCtx

from gradscope.autograd_walk import backward_nodes
from gradscope.errors import UserCodeError, user_frame
from gradscope.gradcheck.inputs import Problem
from gradscope.gradcheck.jacobian import Evaluator, StageError, Tolerance
from gradscope.gradcheck.results import CheckError, Diagnosis, Note


def precision(problem: Problem, tol: Tolerance) -> list[Note]:
    low = sorted({i.dtype for i in problem.infos if i.dtype not in ("float64", "complex128")})
    if not low:
        return []
    return [
        Note(
            "low-precision",
            f"inputs in {', '.join(low)}: finite differences are only "
            f"accurate to a few digits there, so tolerances are loosened to eps={tol.eps:g}, "
            f"atol={tol.atol:g}, rtol={tol.rtol:g}; a small bug can hide under them and "
            "rounding can fail a correct backward. Check in float64 (the default dtype; "
            "complex128 for complex inputs).",
        )
    ]


@contextmanager
def _saves(record: list[tuple[Any, torch.Tensor, int]]) -> Iterator[None]:
    """Note each tensor given to ctx.save_for_backward, with its ctx and its version then."""

    original = FunctionCtx.save_for_backward

    def spy(ctx: Any, *tensors: Any) -> Any:
        record.extend((ctx, t, t._version) for t in tensors if isinstance(t, torch.Tensor))
        return original(ctx, *tensors)

    setattr(FunctionCtx, "save_for_backward", spy)  # noqa: B010 (mypy: a method swap)
    try:
        yield
    finally:
        setattr(FunctionCtx, "save_for_backward", original)  # noqa: B010


def _graph_nodes(outs: list[Any]) -> set[int]:
    """ids of every autograd node behind `outs`: a custom Function's ctx is its node, so a
    ctx not among them (a nested Function's, thrown away) never reaches a backward."""
    return {id(node) for node in backward_nodes(outs)}


MAX_WARNINGS = 3


def _unique(caught: list[warnings.WarningMessage]) -> list[warnings.WarningMessage]:
    seen: dict[str, warnings.WarningMessage] = {}
    for w in caught:
        seen.setdefault(str(w.message), w)
    return list(seen.values())


def probe(problem: Problem) -> tuple[list[Note], list[Any]]:
    """One forward on fresh leaves: in-place writes, outputs that do not require grad."""
    leaves = problem.leaves()
    versions = [leaf._version for leaf in leaves]  # a module's own parameter may be past 0
    saved: list[tuple[Any, torch.Tensor, int]] = []
    with _saves(saved), torch.enable_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outs = Evaluator(problem.fn, problem.inputs, Tolerance(0, 0, 0)).forward(leaves)
    notes = [
        Note("user-warning", f"forward warned: {w.category.__name__}: {w.message}")
        for w in _unique(caught)[:MAX_WARNINGS]
    ]
    for leaf, version, base, info in zip(
        leaves, versions, problem.inputs, problem.infos, strict=False
    ):
        if leaf._version != version or not torch.equal(leaf.detach(), base):
            notes.append(
                Note(
                    "inplace-input",
                    f"forward modified input {info.label} in place: "
                    "autograd sees the modified value as the input; work on a copy or "
                    "call ctx.mark_dirty() on it and return it",
                )
            )
    used = _graph_nodes(outs)
    if any(t._version != v for ctx, t, v in saved if id(ctx) in used):
        notes.append(
            Note(
                "inplace-saved",
                "forward modified a tensor in place after passing it "
                "to ctx.save_for_backward, so backward sees the modified values; save "
                "it after the last change, or save a clone",
            )
        )
    for name, out in zip(problem.output_names, outs, strict=False):
        if not out.requires_grad:
            notes.append(
                Note(
                    "output-no-grad",
                    f"output {name} does not require grad; its "
                    "gradient is checked as zero (mark it with "
                    "ctx.mark_non_differentiable if that is intended)",
                )
            )
    return notes, outs


_PATTERNS = [
    (r"incorrect number of gradients \(expected (\d+), got (\d+)\)", "wrong-grad-count"),
    (r"gradient different than None at position (\d+)", "grad-for-non-tensor"),
    (
        r"invalid gradient at index (\d+) - got \[([\d, ]*)\] but expected shape compatible "
        r"with \[([\d, ]*)\]",
        "grad-shape",
    ),
    (r"modified by an inplace operation", "inplace-saved"),
    (r"leaf Variable that requires grad is being used in an in-place", "inplace-input"),
    (r"must implement the jvp function", "no-jvp"),
    (r"once_differentiable|differentiate twice", "not-twice-differentiable"),
]


def error(check: str, exc: StageError, problem: Problem) -> CheckError:
    """The user's code raised: a failure of this target with the user's file:line."""
    orig = exc.original
    text = str(orig).strip().splitlines()
    where = user_frame(orig)
    location = f"{where[0]}:{where[1]}" if where else _definition(problem, exc.stage)
    message = f"{exc.stage} raised {type(orig).__name__}" + (f": {text[0]}" if text else "")
    trace = UserCodeError(exc.stage, orig).user_traceback()
    return CheckError(
        check, exc.stage, message, location, _meaning(str(orig), exc.stage, problem), trace
    )


def _meaning(text: str, stage: str, problem: Problem) -> Diagnosis:
    for pattern, slug in _PATTERNS:
        match = re.search(pattern, text)
        if match:
            return Diagnosis(slug, _explain(slug, match, problem), _details(slug, match, problem))
    return Diagnosis(
        f"{stage}-error",
        f"the target's {stage} raised; fix it at the location "
        "shown (rerun with --debug for the traceback)",
    )


def _details(slug: str, match: re.Match[str], problem: Problem) -> dict[str, object]:
    """For grad-shape: which argument, and the shapes backward gave and forward took."""
    if slug != "grad-shape":
        return {}
    k = int(match.group(1))
    dims = [[int(d) for d in group.split(",") if d.strip()] for group in match.groups()[1:]]
    name = problem.call[k][0] if 0 <= k < len(problem.call) else None
    return {"argument": name, "got": dims[0], "expected": dims[1]}


def _expected(problem: Problem) -> str:
    return ", ".join(f"grad_{n}" if diff else f"None (for {n})" for n, diff in problem.call)


def _explain(slug: str, match: re.Match[str], problem: Problem) -> str:
    if slug == "wrong-grad-count":
        return (
            f"backward returned {match.group(2)} value(s) but forward takes "
            f"{match.group(1)} argument(s); return one per argument, in order: "
            f"({_expected(problem)})"
        )
    if slug == "grad-for-non-tensor":
        k = int(match.group(1)) - 1
        name = problem.call[k][0] if 0 <= k < len(problem.call) else f"#{k}"
        return (
            f"backward returned a gradient for `{name}`, which is not a tensor input; "
            f"return None there: ({_expected(problem)})"
        )
    if slug == "grad-shape":
        k = int(match.group(1))
        name = problem.call[k][0] if 0 <= k < len(problem.call) else f"#{k}"
        return (
            f"backward returned a gradient of shape [{match.group(2)}] for `{name}` of "
            f"shape [{match.group(3)}]: transposed, or not reduced over broadcast dims"
        )
    return {
        "inplace-saved": "a tensor backward needs was modified in place after it was saved; "
        "clone it before modifying it",
        "inplace-input": "forward modifies an input in place; work on a copy",
        "no-jvp": "forward-mode AD needs a jvp staticmethod on the Function "
        "(with ctx.save_for_forward); drop --forward-ad or define jvp",
        "not-twice-differentiable": "backward is not differentiable (@once_differentiable or "
        "non-differentiable ops), so there is no second order",
    }[slug]


def _definition(problem: Problem, stage: str) -> str | None:
    """Where the Function's backward (or forward/jvp) is defined, when the raise was in torch."""
    method = getattr(
        problem.function, {"forward": "forward", "jvp": "jvp"}.get(stage, "backward"), None
    )
    try:
        method = inspect.unwrap(method)  # type: ignore[arg-type]
        path = inspect.getsourcefile(method)
        lines, start = inspect.getsourcelines(method)
    except (TypeError, OSError):
        return None
    offset = next((k for k, text in enumerate(lines) if text.lstrip().startswith("def ")), 0)
    return f"{_relative(path)}:{start + offset}" if path else None


def _relative(path: str) -> str:
    """Relative to the working directory when below it, as user_frame reports locations."""

    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel
