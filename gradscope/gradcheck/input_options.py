"""What the user says about a gradcheck target's inputs: InputOptions, and the parsers of
`--shape`, `--arg` and `--dtype` (one clear line, exit 2, for a malformed one). No torch."""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass, field
from typing import Any

from gradscope.errors import ConfigError
from gradscope.fmt import clip
from gradscope.gradcheck.values import Domain

DEFAULT_SEED = 0
DTYPES = ("float64", "float32", "float16", "bfloat16", "complex128", "complex64")
_ALIASES = {
    "double": "float64",
    "float": "float32",
    "half": "float16",
    "cdouble": "complex128",
    "cfloat": "complex64",
}


@dataclass(frozen=True)
class InputOptions:
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    args: dict[str, Any] = field(default_factory=dict)
    dtype: str | None = None
    """None: float64 for generated inputs, the target's own dtype for provided ones."""
    seed: int = DEFAULT_SEED
    tensors: dict[str, Any] = field(default_factory=dict)
    """NAME → a literal (nested list of numbers or bools) made into a tensor."""
    domains: dict[str, Domain] = field(default_factory=dict)
    """NAME (or "" for all) → where generated floats are drawn."""
    refits: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """NAME → a shape to make it up with instead of the guess: the shape of the gradient
    backward returned for it (still made up, unlike --shape)."""


MAX_ELEMENTS = 10_000_000
"""The largest generated input: numerical Jacobians cost a forward per sampled element, and
a shape past this is a typo more often than a plan (it would also not fit in memory)."""


def parse_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """`x=3,4` → ("x", (3, 4)); `s=` or `s=()` is a scalar."""
    name, sep, dims = text.partition("=")
    body = dims.strip().strip("()[]").replace("x", ",").replace(" ", "")
    try:
        shape = tuple(int(d) for d in body.split(",") if d)
    except ValueError:
        shape = (-1,)
    if not sep or not name.strip().isidentifier() or any(d < 1 for d in shape):
        raise ConfigError(
            f"--shape {clip(text)!r}: expected NAME=DIMS with positive integers, "
            "e.g. --shape x=3,4 (or x= for a scalar)"
        )
    if math.prod(shape) > MAX_ELEMENTS:
        raise ConfigError(
            f"--shape {clip(text)!r}: {math.prod(shape):,} elements; gradcheck measures a "
            f"derivative per element, so keep an input under {MAX_ELEMENTS:,} elements"
        )
    return name.strip(), shape


def parse_arg(text: str) -> tuple[str, Any]:
    """`dim=1` → ("dim", 1); the value is a Python literal, never evaluated as code."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip().isidentifier():
        raise ConfigError(f"--arg {clip(text)!r}: expected NAME=VALUE, e.g. --arg dim=1")
    try:
        return name.strip(), ast.literal_eval(value.strip())
    except (ValueError, SyntaxError, RecursionError, MemoryError):
        raise ConfigError(
            f"--arg {clip(text)!r}: {clip(value.strip())!r} is not a Python literal "
            f"(numbers, True/False/None, quoted strings, lists, dicts; e.g. "
            f"--arg {name.strip()}=\"'{clip(value.strip())}'\")"
        ) from None


def parse_dtype(text: str) -> str:
    name = _ALIASES.get(
        text.strip().lower().removeprefix("torch."), text.strip().lower().removeprefix("torch.")
    )
    if name not in DTYPES:
        raise ConfigError(f"--dtype {clip(text)!r}: expected one of {', '.join(DTYPES)}")
    return name
