"""A report for a stream that cannot encode it (an ASCII-only stdout: the C locale without
UTF-8 mode, PYTHONIOENCODING=ascii): gradscope's own symbols and rich's table lines in
ASCII, anything else (the user's names) as backslash escapes. Never a failed write."""

from __future__ import annotations

import codecs
import unicodedata

FALLBACKS = {
    "·": "-",
    "→": "->",
    "←": "<-",
    "↔": "<->",
    "×": "x",
    "‖": "||",
    "²": "^2",
    "≈": "~",
    "∝": "~",
    "Σ": "sum ",
    "Δ": "delta ",
    "√": "sqrt",
    "…": "...",
    "—": "--",
    "\u2013": "-",  # en dash
    "β": "beta",
    "ε": "eps",
    "μ": "u",
    "µ": "u",
    "±": "+/-",
    "≥": ">=",
    "≤": "<=",
    "✓": "ok",
    "✅": "ok",
    "✗": "x",
    "✕": "x",
    "❌": "x",
    "⚠": "!",
    "◀": "<",
    "\ufe0f": "",  # the emoji variation selector
    "▁": "_",
    "▂": ".",
    "▃": "-",
    "▄": ":",
    "▅": "=",
    "▆": "+",
    "▇": "*",
    "█": "#",
}


def for_encoding(text: str, encoding: str | None, markup: str | None = None) -> str:
    """`text` as `encoding` can write it: unchanged when it can (UTF-8 always can, but for
    a lone surrogate from the user's error message, escaped). `markup` "json" or "xml":
    what cannot be written becomes that format's own escape (the document still parses
    to the same data) instead of a look-alike."""
    name = _codec(encoding)
    try:
        text.encode(name)
        return text
    except UnicodeEncodeError:
        pass
    if markup == "json":
        return "".join(c if _encodes(c, name) else _json_escape(c) for c in text)
    if markup == "xml":
        return text.encode(name, "xmlcharrefreplace").decode(name)
    plain = "".join(c if _encodes(c, name) else _fallback(c) for c in text)
    return plain.encode(name, "backslashreplace").decode(name)


def _json_escape(c: str) -> str:
    """JSON's \\u escape (a surrogate pair above the BMP); JSON text is ASCII outside its
    strings, so only string contents get here."""
    point = ord(c)
    if point <= 0xFFFF:
        return f"\\u{point:04x}"
    point -= 0x10000
    return f"\\u{0xD800 + (point >> 10):04x}\\u{0xDC00 + (point & 0x3FF):04x}"


def _fallback(c: str) -> str:
    if c in FALLBACKS:
        return FALLBACKS[c]
    if "\u2500" <= c <= "\u257f":  # box drawing: rich's table and panel lines
        name = unicodedata.name(c, "")
        if "HORIZONTAL" in name and "VERTICAL" not in name:
            return "-"
        if "VERTICAL" in name and "HORIZONTAL" not in name:
            return "|"
        return "+"
    return c


def _encodes(c: str, name: str) -> bool:
    try:
        c.encode(name)
    except UnicodeEncodeError:
        return False
    return True


def _codec(encoding: str | None) -> str:
    try:
        return codecs.lookup(encoding or "utf-8").name
    except LookupError:
        return "utf-8"
