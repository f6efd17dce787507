"""`gradscope gradcheck` as one function: custom autograd Functions checked against
numerical derivatives, with typed options over each [[gradcheck]] entry's own."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gradscope import config
from gradscope.api.arguments import settings_or_default
from gradscope.api.options import GradcheckOptions
from gradscope.config import CheckEntry
from gradscope.errors import TargetError

# the gradcheck checker (and the GS2xx rules) is imported in functions: `gradscope --help`
# must not load it

if TYPE_CHECKING:
    from gradscope.gradcheck.results import GradcheckReport


def gradcheck(
    specs: Sequence[str] = (),
    options: GradcheckOptions | None = None,
    settings: config.Settings | None = None,
    **given: object,
) -> GradcheckReport:
    """`gradscope gradcheck SPEC...` without the printing, its findings judged by
    `settings`. `given`: GradcheckOptions fields over `options`, typed: shape={"x": (3, 4)},
    args={"dim": 1}, tensor={"target": [0, 2, 1]}, dtype="float64", seed=3. No `specs`:
    the settings' [[gradcheck]] entries."""

    from gradscope.gradcheck.checker import run
    from gradscope.gradcheck.findings import judged

    options = GradcheckOptions.over(options, given)
    settings = settings_or_default(settings)
    return judged(run(build_jobs(list(specs), settings, options)), settings)


def build_jobs(
    specs: list[str], settings: config.Settings, options: GradcheckOptions
) -> list[tuple[str, Any]]:
    """(SPEC, Options) pairs: config entries for a SPEC first, the options over them."""
    from gradscope.gradcheck.checker import options_for

    entries: list[tuple[str, CheckEntry | None]] = [(e.target, e) for e in settings.gradcheck]
    if specs:
        entries = [(s, next((e for t, e in entries if t == s), None)) for s in specs]
    if not entries:
        raise TargetError(
            "no SPEC given and no [[tool.gradscope.gradcheck]] entry in the "
            "config; try: gradscope gradcheck gradscope.examples.functions:"
            "CustomReLU"
        )
    return [
        (
            spec,
            options_for(
                entry,
                shapes=dict(options.shape),
                args=dict(options.args),
                tensors=dict(options.tensor),
                domains=dict(options.domain),
                dtype=options.dtype,
                seed=options.seed,
                second_order=options.second_order,
                forward_ad=options.forward_ad,
            ),
        )
        for spec, entry in entries
    ]
