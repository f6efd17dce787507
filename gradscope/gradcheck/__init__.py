"""`gradscope gradcheck`: which gradient of a custom Function is wrong, where, and why.

targets (resolve a SPEC) → inputs (build a Problem) → stages (sampled verdict, then
full blocks where it failed, measured by jacobian) → compared and diagnose (name the
pattern; diagnose_shapes for those read off positions) and
notes (warnings, torch's errors explained) → results (plain data) → findings (for
`gradscope check`). checker runs them in order, with the Options of options.

    from gradscope.gradcheck import check
    result = check(MyFunction)

The checker is imported by the first use of a name here, not by importing the package:
gradscope/__init__.py loads gradcheck/findings.py (the GS2xx declarations) on every
command, `--help` included.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gradscope.gradcheck.checker import (
        InputOptions,
        Options,
        check,
        check_resolved,
        load,
        options_for,
        run,
    )

__all__ = ["InputOptions", "Options", "check", "check_resolved", "load", "options_for", "run"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from gradscope.gradcheck import checker

        return getattr(checker, name)
    raise AttributeError(f"module 'gradscope.gradcheck' has no attribute {name!r}")
