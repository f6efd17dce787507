"""`gradscope gradcheck`: which gradient of a custom Function is wrong, where, and why.

targets (resolve a SPEC) → inputs (build a Problem) → stages (sampled verdict, then
full blocks where it failed, measured by jacobian) → compared and diagnose (name the
pattern; diagnose_shapes for those read off positions) and
notes (warnings, torch's errors explained) → results (plain data) → findings (for
`gradscope check`). checker runs them in order, with the Options of options.

    from gradscope.gradcheck import check
    result = check(MyFunction)
"""

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
