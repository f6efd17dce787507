"""The one way terminal renderers turn strings into rich text: never parsed as markup.

Names, error messages and paths come from the user's code. Parsed as rich markup, a
message such as "expected [batch, 3]" loses its brackets and "[/x]" raises inside the
renderer; printed raw, an ESC sequence repaints the user's terminal. `styled` builds a
`rich.text.Text` from (string, style) parts with every string made printable
(`gradscope.fmt.printable`), so neither can happen whatever a renderer puts in.
"""

from __future__ import annotations

from typing import TypeAlias

from rich.text import Text

from gradscope.fmt import printable

Part: TypeAlias = "str | tuple[str, str] | Text"
"""A plain string, a (string, style) pair, or Text already built by `styled`."""


def styled(*parts: Part, style: str = "") -> Text:
    """Text of `parts` in order; a pair's style applies to its string, `style` to all."""
    out = Text(style=style)
    for part in parts:
        if isinstance(part, Text):
            out.append_text(part)
        elif isinstance(part, tuple):
            out.append(printable(part[0]), style=part[1] or None)
        else:
            out.append(printable(part))
    return out
