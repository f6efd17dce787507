"""Failures that a made-up input explains are never blamed on the Function.

A made-up input (guesses.py) is a guess at what the Function takes. Two failures say the
guess was wrong rather than the gradient: backward returning None for a made-up tensor
(the argument is a number, or has no gradient by design) and backward returning a gradient
of another shape (torch refuses it before anything is compared). The first is set aside as
"could not check" with the --arg/--shape to pass, the other inputs still checked; the second
is tried again with the input shaped like the gradient backward returned, and if that is
refused too, the target could not be checked at all (exit 2, with the --shape to pass).
"""

from __future__ import annotations

from gradscope.errors import TargetError
from gradscope.gradcheck.inputs import Problem
from gradscope.gradcheck.results import UNCHECKED, CheckError, Note, PairFailure

SLUG = UNCHECKED
REFIT = "made-up-shape"
"""A note that an input was checked in the shape of the gradient backward returned."""


def set_aside(
    problem: Problem, failures: list[PairFailure]
) -> tuple[list[PairFailure], list[Note]]:
    """The failures that stand, and a note per made-up tensor backward gave no gradient."""
    kept: list[PairFailure] = []
    notes: dict[str, Note] = {}
    for f in failures:
        made = problem.made_up.get(f.input.name)
        if made is None or made.shape is None or f.diagnosis.slug != "none-grad":
            kept.append(f)
            continue
        notes[f.input.name] = Note(
            SLUG,
            f"could not check {f.input.label} with made-up inputs: it was made up as a "
            f"{made.describe()} tensor and backward returns None for it, as for a number or an "
            f"argument without a gradient; pass --arg {f.input.name}=VALUE if it is a number, "
            f"or --shape {f.input.name}=DIMS if it is a tensor (backward must then return "
            "its gradient)",
            f.input.name,
        )
    return kept, list(notes.values())


def refit(problem: Problem, errors: tuple[CheckError, ...]) -> tuple[str, tuple[int, ...]] | None:
    """(name, shape) when backward returned a gradient shaped unlike a made-up tensor: the
    Function takes that argument in the gradient's shape, most likely."""
    for e in errors:
        details = e.diagnosis.details
        name = details.get("argument")
        made = problem.made_up.get(name) if isinstance(name, str) else None
        if e.diagnosis.slug == "grad-shape" and made is not None and made.shape is not None:
            return str(name), tuple(details["got"])
    return None


def refit_note(name: str, first: str, shape: tuple[int, ...]) -> Note:
    dims = ",".join(map(str, shape))
    return Note(
        REFIT,
        f"{name} was made up as {first}, and backward returned a gradient of shape "
        f"[{', '.join(map(str, shape))}] for it, so it was checked in that shape; if {name} "
        f"is {first}, that gradient is the wrong shape: pass --shape {name}=DIMS to check "
        f"it as you call it (--shape {name}={dims} keeps this one)",
        name,
    )


def refused(label: str, name: str, first: str, shape: tuple[int, ...], why: str) -> TargetError:
    """The target could not be checked: exit 2 with the input to state."""
    return TargetError(
        f"could not check {label} with made-up inputs: backward returned a gradient of shape "
        f"[{', '.join(map(str, shape))}] for `{name}` (made up as {first}), and {why}; pass "
        f"--shape {name}=DIMS (and --arg NAME=VALUE for the numbers) or a `gradcheck_inputs` "
        "function (docs/gradcheck.md)"
    )
