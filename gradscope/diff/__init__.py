"""`gradscope diff`: two models on one batch with the same weights; where they first differ.

`diff(ref, new, batch, loss_fn)` and `diff_targets("ref.py:build", "new.py:build")` return
a `DiffResult` (gradscope/diff/result.py); torch is imported by the first call, not here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gradscope.inspector import targets

if TYPE_CHECKING:
    from gradscope.diff.options import DiffOptions
    from gradscope.diff.result import DiffResult

# the engine (torch) is imported in functions: `gradscope --help` must not load it

__all__ = ["diff", "diff_targets"]


def diff(ref: Any, new: Any, batch: Any, loss_fn: Any = None, **kwargs: Any) -> DiffResult:
    """See gradscope.diff.engine.diff."""
    from gradscope.diff.engine import diff as run

    return run(ref, new, batch, loss_fn, **kwargs)


def diff_targets(ref: str, new: str | None, options: DiffOptions | None = None) -> DiffResult:
    """`gradscope diff REF NEW` without the printing: the reference's batch and loss for both.

    `new` None: the reference against itself under the options' second setting."""
    from gradscope.diff.engine import diff as run

    a = targets.load(ref)
    if new is None:
        return run(
            a.model,
            a.model,
            a.batch,
            a.loss_fn,
            options=options,
            ref_label=a.label,
            new_label=a.label,
        )
    b = targets.load(new)
    return run(
        a.model, b.model, a.batch, a.loss_fn, options=options, ref_label=a.label, new_label=b.label
    )
