"""The versioned JSON document (schema in docs/json-schema.md).

Strict JSON (gradscope/safe_json.py): NaN and infinities, which JSON cannot hold, become
the strings "nan", "inf" and "-inf".
"""

from __future__ import annotations

from typing import Any

from gradscope import safe_json


def dumps(document: dict[str, Any]) -> str:
    return safe_json.dumps(document, indent=2) + "\n"
