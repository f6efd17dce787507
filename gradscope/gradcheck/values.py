"""Inputs a user states on the command line: tensor literals and the domain of generated floats.

`--tensor target=[0,2,1]` is an integer tensor (bool and float literals work too: a float
literal is a differentiable input at exactly that point); `--domain positive` or
`--domain alpha=1.1,3` keeps generated floats where the function is defined. Parsed without
torch (`gradscope --help` must stay light), made into tensors when inputs are built.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from typing import Any

from gradscope.errors import ConfigError
from gradscope.fmt import clip

# torch is imported in functions: `gradscope --help` must not load it

MARGIN = 0.1
"""Generated values keep this far from an open bound (and from 0 for `nonzero`), so the
finite-difference step (1e-6 in float64) never crosses it."""
EDGE = 0.05
"""A bounded interval is sampled on its middle 90%, for the same reason."""


@dataclass(frozen=True)
class Domain:
    """Where generated floats are drawn: an interval, optionally with 0 taken out."""

    name: str
    low: float = -math.inf
    high: float = math.inf
    nonzero: bool = False

    def sample(self, z: Any) -> Any:
        """Standard-normal draws `z` mapped into the domain (the same draws as without one)."""
        import torch

        low, high = self.low, self.high
        if math.isfinite(low) and math.isfinite(high):
            unit = 0.5 * (1 + torch.erf(z / math.sqrt(2)))
            return low + (high - low) * (EDGE + (1 - 2 * EDGE) * unit)
        if math.isfinite(low):
            return low + MARGIN + z.abs()
        if math.isfinite(high):
            return high - MARGIN - z.abs()
        if self.nonzero:
            return torch.where(z < 0, z - MARGIN, z + MARGIN)
        return z

    def describe(self) -> str:
        if self.name != "interval":
            return self.name
        return f"[{self.low:g}, {self.high:g}]"


DOMAINS = {
    "real": Domain("real"),
    "positive": Domain("positive", low=0.0),
    "negative": Domain("negative", high=0.0),
    "nonzero": Domain("nonzero", nonzero=True),
    "unit": Domain("unit", 0.0, 1.0),
}
ALL = ""
"""The name under which a --domain without NAME= is kept: every generated float."""


def parse_domain(text: str) -> tuple[str, Domain]:
    """`positive` → ("", positive); `alpha=1.1,3` → ("alpha", [1.1, 3]); `x=0,inf` too."""
    head, sep, body = text.partition("=")
    name = head.strip() if sep else ALL
    body = (body if sep else head).strip().lower()
    if sep and not name.isidentifier():
        raise _domain_error(text)
    if body in DOMAINS:
        return name, DOMAINS[body]
    low, comma, high = body.strip("[]() ").partition(",")
    try:
        bounds = float(low), float(high)
    except ValueError:
        raise _domain_error(text) from None
    if not comma or not bounds[0] < bounds[1] or math.isnan(bounds[0] + bounds[1]):
        raise _domain_error(text)
    return name, Domain("interval", *bounds)


def _domain_error(text: str) -> ConfigError:
    return ConfigError(
        f"--domain {clip(text)!r}: expected [NAME=]DOMAIN with DOMAIN one of "
        f"{', '.join(DOMAINS)} or LOW,HIGH (e.g. --domain positive, --domain alpha=1.1,3, "
        "--domain p=0,1)"
    )


def parse_tensor(text: str) -> tuple[str, Any]:
    """`target=[0,2,1]` → ("target", [0, 2, 1]): a rectangular literal of numbers or bools."""
    name, sep, body = text.partition("=")
    if not sep or not name.strip().isidentifier():
        raise ConfigError(
            f"--tensor {clip(text)!r}: expected NAME=LITERAL, e.g. --tensor target=[0,2,1]"
        )
    try:
        value = ast.literal_eval(body.strip())
    except (ValueError, SyntaxError, RecursionError, MemoryError):
        value = None
    problem = _not_rectangular(value)
    if problem:
        raise ConfigError(
            f"--tensor {clip(text)!r}: {problem}; expected a number, True/False or a rectangular "
            "nested list of them, e.g. --tensor target=[0,2,1] or --tensor mask=[[True,False]]"
        )
    return name.strip(), value


def _not_rectangular(value: Any) -> str | None:
    if isinstance(value, (bool, int, float)):
        return None
    if not isinstance(value, (list, tuple)):
        return f"{value!r} is not a literal tensor"
    if not value:
        return "an empty list has no shape"
    inner = [_shape(v) for v in value]
    if any(s is None for s in inner) or len(set(inner)) != 1:
        return "rows differ in length or hold something other than numbers"
    return None


def _shape(value: Any) -> tuple[int, ...] | None:
    if isinstance(value, (bool, int, float)):
        return ()
    if not isinstance(value, (list, tuple)) or not value:
        return None
    inner = {_shape(v) for v in value}
    if len(inner) != 1 or None in inner:
        return None
    return (len(value), *next(iter(inner)))  # type: ignore[misc]


def make_tensor(value: Any, dtype: Any) -> Any:
    """bool literals → bool, int → int64, any float → `dtype`, differentiable."""
    import torch

    flat = _leaves(value)
    if all(isinstance(v, bool) for v in flat):
        return torch.tensor(value, dtype=torch.bool)
    if all(isinstance(v, int) for v in flat):
        return torch.tensor(value, dtype=torch.int64)
    return torch.tensor(value, dtype=dtype).requires_grad_()


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]
