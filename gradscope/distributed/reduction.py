"""DDP's reduction errors, read: parameter indices mapped to names, and the cheapest fix.

DDP raises two errors about parameter usage, both naming parameters by index
(names only under TORCH_DISTRIBUTED_DEBUG):

- "Expected to have finished reduction in the prior iteration ..." with
  "Parameter indices which did not receive grad for rank R: 2 3": some
  parameters got no gradient in the last backward;
- "Expected to mark a variable ready only once ..." with "Parameter at index 3
  ... has been marked as ready twice": a reentrant backward (checkpoint) or a
  second backward reached a parameter again.

No torch here: the caller passes the names in DDP's order and what it knows.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

UNFINISHED = "Expected to have finished reduction in the prior iteration"
READY_TWICE = "Expected to mark a variable ready only once"
_INDICES = re.compile(r"Parameter indices which did not receive grad for rank (\d+):([\d\s]*)")
_TWICE = re.compile(r"Parameter at index (\d+)")


@dataclass(frozen=True)
class ReductionError:
    """What DDP's message says, in names."""

    kind: str
    """"unused" or "ready-twice"."""
    rank: int | None
    indices: tuple[int, ...]
    names: tuple[str, ...]


def parse(message: str, names: Sequence[str]) -> ReductionError | None:
    """The DDP usage error in `message` with indices mapped to `names`, or None."""
    if UNFINISHED in message:
        m = _INDICES.search(message)
        rank = int(m.group(1)) if m else None
        indices = tuple(int(i) for i in m.group(2).split()) if m else ()
        return ReductionError("unused", rank, indices, _names(indices, names))
    if READY_TWICE in message:
        found = tuple(int(i) for i in _TWICE.findall(message))
        return ReductionError("ready-twice", None, found, _names(found, names))
    return None


def _names(indices: Sequence[int], names: Sequence[str]) -> tuple[str, ...]:
    return tuple(names[i] if 0 <= i < len(names) else f"<index {i}>" for i in indices)


def advice(kind: str, cause: str | None, varies: bool, finds_unused: bool = False) -> str:
    """The least costly fix for a usage problem.

    `cause` is a usage cause (never-ran, output-dropped, detached, cut-inside,
    used-twice); `varies` is True when the unused set differs between ranks or
    steps, the only case that needs find_unused_parameters=True; `finds_unused`: the
    model already passes it, so DDP does not fail, but the ranks still train apart.
    """
    if kind == "ready-twice" or cause == "used-twice":
        return (
            "checkpoint with use_reentrant=False (torch.utils.checkpoint.checkpoint(..., "
            "use_reentrant=False)); if the graph is the same every step, static_graph=True "
            "on DistributedDataParallel also works"
        )
    if varies and finds_unused:
        return (
            "find_unused_parameters=True keeps DDP from failing, but the ranks train different "
            "models: make every rank run the same modules (no branch on the rank or on "
            "rank-local state)"
        )
    if varies:
        return (
            "the set of used parameters changes between ranks or steps: make every rank run "
            "the same modules (no rank-dependent branches), or pass "
            "find_unused_parameters=True to DistributedDataParallel (costs a graph traversal "
            "per step)"
        )
    fixes = {
        "never-ran": "remove the module, or freeze it (requires_grad_(False)) before wrapping "
        "the model in DistributedDataParallel",
        "output-dropped": "add the output to the loss, or remove or freeze the module that "
        "produces it",
        "detached": "remove the .detach() if the module should learn, or freeze the module "
        "(requires_grad_(False)) before wrapping",
        "cut-inside": "the module's forward cuts its own parameters out of the graph (no_grad "
        "or .detach() inside it): remove the cut, or freeze the module",
    }
    return fixes.get(
        cause or "",
        "freeze the parameters that take no part in the loss before wrapping; "
        "find_unused_parameters=True only if the set really varies between steps",
    )


CAUSE_WORDS = {
    "never-ran": "its module never ran in the forward",
    "output-dropped": "its module ran but its output is not part of the loss",
    "detached": "its module's output was cut from the graph by .detach()",
    "cut-inside": "a gradient reached its module's output but not the parameter (a cut "
    "inside the module's forward)",
    "used-twice": "its gradient was accumulated twice in one backward (reentrant checkpoint "
    "or a second backward through it)",
}
