"""The thresholds the rules compare against: their values (Thresholds, each key at its
declared default unless set) and the one check of a value, from a flag or a file. The keys
and defaults are declared with the rules (findings.THRESHOLDS). No torch."""

from __future__ import annotations

import math
from typing import Any

from gradscope.findings import THRESHOLDS


class Thresholds:
    """Numbers the rules compare against: every key is declared with the rule that owns it
    (`@rule(thresholds=(Threshold(...),))`, findings.THRESHOLDS) and read here as an
    attribute in snake_case (`t.explode_norm`), at its declared default unless set.
    Immutable; `with_values` gives a changed copy."""

    _set: dict[str, float]

    def __init__(self, **values: float) -> None:
        unknown = [k for k in values if _kebab(k) not in THRESHOLDS]
        if unknown:
            raise TypeError(f"unknown thresholds: {', '.join(sorted(unknown))}")
        object.__setattr__(self, "_set", {_kebab(k): v for k, v in values.items()})

    def __getattr__(self, name: str) -> float:
        """The value, looked up once: kept as an attribute, so the rules' loops read it plainly."""
        if name.startswith("_"):  # (pickle's lookups, before _set exists)
            raise AttributeError(name)
        key = _kebab(name)
        if key not in self._set and key not in THRESHOLDS:
            raise AttributeError(f"no threshold {key!r} is declared")
        value: float = self._set[key] if key in self._set else THRESHOLDS[key].default
        object.__setattr__(self, name, value)
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Thresholds are immutable: use with_values()")

    def values(self) -> dict[str, float]:
        """Every declared key → its value, in the declarations' order."""
        return {k: self._set.get(k, t.default) for k, t in THRESHOLDS.items()}

    def with_values(self, **changes: float) -> Thresholds:
        return Thresholds(**{**self._set, **{_kebab(k): v for k, v in changes.items()}})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Thresholds) and self.values() == other.values()

    def __hash__(self) -> int:
        return hash(tuple(self.values().items()))

    def __repr__(self) -> str:
        return f"Thresholds({', '.join(f'{k}={v!r}' for k, v in self._set.items())})"

    @classmethod
    def keys(cls) -> list[str]:
        return list(THRESHOLDS)


def threshold_value(value: Any, key: str | None = None) -> float:
    """The one check for a threshold, from a flag or a file: a finite, non-negative number
    (NaN would silently switch a rule off, a negative one flag everything), above 0 for
    the keys declared above_zero; checked before anything runs."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"expected a non-negative number, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"expected a finite, non-negative number, got {value!r}")
    if value == 0 and key is not None and key in THRESHOLDS and THRESHOLDS[key].above_zero:
        raise ValueError(f"expected a number above 0, got {value!r}")
    return float(value)


def _kebab(name: str) -> str:
    return name.replace("_", "-")
