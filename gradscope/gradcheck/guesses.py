"""Made-up inputs that fit everyday signatures: what a parameter's name says it holds.

A parameter without a default, --arg, --shape or --tensor gets a made-up value. Most get
a DEFAULT_SHAPE tensor; a few names say more: a bias is a vector (one value per feature of
the last dimension), a scale or an eps one positive number (a 0-dim tensor, which a
forward takes where it takes a float), a dim or an axis an index. A guess only makes the
first forward likelier to run; a failure a made-up input can explain is never blamed on
the Function (gradscope.gradcheck.made_up).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gradscope.gradcheck.values import DOMAINS, Domain

SCALAR_NAMES = frozenset(
    {
        "scale",
        "scaling",
        "eps",
        "epsilon",
        "temperature",
        "temp",
        "tau",
        "margin",
        "momentum",
        "negative_slope",
        "smoothing",
        "label_smoothing",
        "lambd",
        "factor",
    }
)
"""Names that nearly always hold one number: made up as a positive 0-dim tensor."""
AXIS_NAMES = frozenset({"dim", "axis"})
"""Names of an axis index: made up as -1 (the last dimension), not a tensor."""


@dataclass(frozen=True)
class Guess:
    """A made-up value: a tensor of `shape` (drawn from `domain`), or the Python `value`."""

    shape: tuple[int, ...] | None = None
    domain: Domain | None = None
    value: Any = None
    why: str = ""
    """What the name said, for the report ("" for the plain default)."""

    def describe(self) -> str:
        """How the input was made up: `4×4`, `4 (a bias, from its name)`, `-1 (an axis, ...)`."""
        if self.shape is None:
            text = repr(self.value)
        else:
            text = "×".join(map(str, self.shape)) or "0-dim"
        return f"{text} ({self.why})" if self.why else text


def guess(name: str, default_shape: tuple[int, ...]) -> Guess:
    """The made-up value for a parameter called `name`."""
    low = name.lower()
    if low in AXIS_NAMES:
        return Guess(value=-1, why="an axis, from its name")
    if low in SCALAR_NAMES:
        return Guess((), DOMAINS["positive"], why="one number, from its name")
    if low.endswith("bias"):
        return Guess(default_shape[-1:], why="a bias, from its name")
    return Guess(default_shape)
