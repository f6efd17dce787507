"""JSON text that strict parsers read, for every JSON gradscope writes (the report, the
--log lines): NaN and the infinities, which JSON cannot hold, become the strings "nan",
"inf" and "-inf"; tensors and numpy values become numbers (or lists of them), paths
strings, dataclasses objects of their fields. No torch or numpy import: they are
recognised by what they have (`tolist`)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Any

_PLAIN = (str, int, bool, type(None))


def json_safe(value: Any) -> Any:
    """`value` with only what strict JSON holds (the rest as above)."""
    if isinstance(value, float):  # numpy's float64 too
        if math.isfinite(value):
            return value
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: json_safe(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if callable(getattr(value, "tolist", None)):  # a tensor, a numpy array or scalar
        return json_safe(value.tolist())
    return value


_ONE_LINE = json.JSONEncoder(allow_nan=False)
"""Made once: a --log line is written per step (json.dumps with any option makes one a call)."""


def dumps(value: Any, indent: int | None = None) -> str:
    """`value` as strict JSON text (json.dumps' separators; ASCII, lone surrogates escaped)."""
    if indent is None:
        return _ONE_LINE.encode(json_safe(value))
    return json.dumps(json_safe(value), indent=indent, allow_nan=False)
