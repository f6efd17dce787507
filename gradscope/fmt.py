"""How numbers and byte counts read in every report, finding and graph label (no torch)."""

from __future__ import annotations

from collections.abc import Sequence


def num(x: float | None, digits: int = 3) -> str:
    """Every number a report shows: `digits` significant digits, plain in [1e-3, 1e4),
    scientific outside, so a column of them lines up; None is "-".

    3 digits tell magnitudes apart (norms, ratios); gradcheck's values use 4, a loss 6.
    """
    if x is None:
        return "-"
    if x == 0:
        return "0"
    return f"{x:.{digits}g}" if 1e-3 <= abs(x) < 1e4 else f"{x:.{max(digits - 1, 1)}e}"


def listed(names: Sequence[str], most: int = 4) -> str:
    """The first `most` names, comma-separated, and how many more ("a, b (+3 more)"): a
    finding's subjects or evidence, however many there are."""
    more = f" (+{len(names) - most} more)" if len(names) > most else ""
    return ", ".join(names[:most]) + more


def duration(seconds: float) -> str:
    """How long something took, in every report: "<1 ms", "8.2 ms", "328 ms", "4.4 s"."""
    if seconds < 1e-3:
        return "<1 ms"
    if seconds < 1:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds:.3g} s" if seconds < 100 else f"{seconds:.0f} s"


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def printable(text: str) -> str:
    """The user's text with control characters (ESC, NUL, ...) shown as escapes, so nothing
    the user's code or files produce reaches the terminal raw."""
    return "".join(c if c.isprintable() or c in "\n\t" else repr(c)[1:-1] for c in text)


def clip(text: str, width: int = 60) -> str:
    """The user's long input shortened for a one-line error or a table cell: its start
    and its end, so a name keeps its root module and its leaf."""
    text = printable(text)
    if len(text) <= width:
        return text
    half = (width - 1) // 2
    return text[:half] + "…" + text[len(text) - (width - 1 - half) :]
