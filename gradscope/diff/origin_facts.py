"""What is said about where two models' difference starts: the first submodule call inside
the origin whose inputs already differ, the differing gradient nearest the loss, and the two
origin modules described (where each was made, how their settings differ)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import torch

from gradscope.diff import align
from gradscope.diff.result import ModuleRow, ParamRow
from gradscope.diff.run import assigned


def where_it_starts(
    row: ModuleRow,
    ref: torch.nn.Module,
    new: torch.nn.Module,
    ref_mods: dict[str, torch.nn.Module],
    new_mods: dict[str, torch.nn.Module],
) -> ModuleRow:
    """The row where the difference starts, with where each module was made and how their
    settings differ."""
    return replace(
        row,
        ref_made=assigned(ref, row.ref),
        new_made=assigned(new, row.new) if row.new is not None else "",
        settings=_settings(ref_mods.get(row.ref), new_mods.get(row.new or "")),
    )


def _settings(a: torch.nn.Module | None, b: torch.nn.Module | None) -> str:
    """The two modules' `extra_repr()` where they differ (an eps, an approximate="tanh")."""
    if a is None or b is None:
        return ""
    try:
        x, y = a.extra_repr(), b.extra_repr()
    except Exception:  # the user's extra_repr: a description, never a failure
        return ""
    if x == y or not (x or y):
        return ""
    return f"reference {type(a).__name__}({x}) vs new {type(b).__name__}({y})"


def first_input_inside(rows: Sequence[ModuleRow], start: int | None) -> int | None:
    """Inside the origin module: the first submodule call whose inputs already differ
    (the difference arose in the origin's own code just before it)."""
    if start is None or not rows[start].ref:
        prefix = ""
    else:
        prefix = rows[start].ref + "."
    if start is None:
        return None
    for i in range(start):
        row = rows[i]
        inside = row.ref.startswith(prefix) if prefix else row.ref != ""
        if inside and row.inputs is not None and row.inputs.differs:
            return i
    return None


def first_grad(params: Sequence[ParamRow], rows: Sequence[ModuleRow]) -> int | None:
    """The differing gradient nearest the loss: its module finished its forward last."""
    finished: dict[str, int] = {}
    for i, r in enumerate(rows):
        finished.setdefault(r.ref, i)
    order = sorted(
        range(len(params)),
        key=lambda k: -finished.get(align.owner(params[k].ref), -1),
    )
    return next((k for k in order if _differs(params[k])), None)


def _differs(p: ParamRow) -> bool:
    return p.grad is not None and p.grad.differs
