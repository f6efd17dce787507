"""The versioned JSON document (schema in docs/json-schema.md).

Strict JSON: NaN and infinities, which JSON cannot hold, become the strings
"nan", "inf" and "-inf".
"""

from __future__ import annotations

import json
import math
from typing import Any


def _strict(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(v) for v in value]
    return value


def dumps(document: dict[str, Any]) -> str:
    return json.dumps(_strict(document), indent=2, allow_nan=False) + "\n"
