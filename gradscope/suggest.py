""" "Did you mean": the close match in a closed set (example names, rule ids and slugs,
threshold keys, files beside a missing one) for a name the user misspelt. No torch."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

CUTOFF = 0.75
"""How alike a name must be (difflib's ratio) to be offered: `detached-midle` finds
`detached-middle`, `GS14` finds `GS104`; unrelated names find nothing."""


def close_match(word: str, choices: Iterable[str], cutoff: float = CUTOFF) -> str | None:
    """The choice closest to `word` (case aside), or None when none is close."""
    by_folded = {c.casefold(): c for c in choices}
    found = difflib.get_close_matches(word.casefold(), list(by_folded), n=1, cutoff=cutoff)
    return by_folded[found[0]] if found else None


def did_you_mean(word: str, choices: Iterable[str], cutoff: float = CUTOFF) -> str:
    """ "; did you mean X?" to end a message with, or "" when nothing is close."""
    found = close_match(word, choices, cutoff)
    return f"; did you mean {found}?" if found else ""
