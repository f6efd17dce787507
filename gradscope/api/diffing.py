"""`gradscope diff` as one function: two models on one batch, or two runs' `--log` files,
compared; where they first differ."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gradscope import config
from gradscope.api.arguments import check_spec, settings_or_default
from gradscope.api.options import over
from gradscope.api.pictures import Plot, diff_plot
from gradscope.diff import diff_targets
from gradscope.diff.options import DiffOptions
from gradscope.diff.runs import RunsOptions, diff_logs
from gradscope.diff.runs import is_log as named_like_a_log
from gradscope.diff.runs.tolerance import RTOL
from gradscope.errors import GradscopeError

if TYPE_CHECKING:
    from gradscope.diff.result import DiffResult
    from gradscope.diff.runs.result import RunsDiff


def diff(
    ref: str,
    new: str | None = None,
    options: DiffOptions | None = None,
    settings: config.Settings | None = None,
    **given: object,
) -> DiffResult | RunsDiff:
    """`gradscope diff REF NEW` without the printing, its findings judged by `settings`.
    `given`: DiffOptions fields over `options` (rtol=1e-4, plot="diff.png").

    Two `gradscope watch --log` files (.jsonl, .jsonl.gz): the runs compared step by
    step (`dtype`: the one they trained in, when their logs do not say). Else two targets
    (or REF against itself under a second setting: `autocast` "bf16" or "fp16",
    `compile`, `deterministic`), with the options only two models take: seed,
    allow_transposed, noise_check. `plot`: also draw the comparison (.png, .svg, .pdf)."""

    options = over(DiffOptions, options, given)
    settings = settings_or_default(settings)
    picture = Plot.of(options.plot)
    result: DiffResult | RunsDiff
    if new is not None and (is_log(ref) or is_log(new)):
        result = diff_runs(ref, new, options)
    else:
        result = diff_models(check_spec(ref, "REF"), new, options)
    result.findings = settings.judged(result.findings)
    if picture is not None and not getattr(result, "could_not_run", None):
        diff_plot(picture, result)
    return result


def is_log(path: str) -> bool:
    return named_like_a_log(path)


def diff_runs(ref: str, new: str, options: DiffOptions) -> RunsDiff:
    """Two `watch --log` files compared, unjudged."""

    for path in (ref, new):
        if not is_log(path):
            raise GradscopeError(
                f"{path}: to diff two runs give two `gradscope watch --log` files "
                "(.jsonl or .jsonl.gz)"
            )
    dtype = options.dtype
    name = dtype.lower().removeprefix("torch.") if dtype else None
    if name is not None and name not in RTOL:
        raise GradscopeError(f"--dtype {dtype}: use one of {', '.join(RTOL)}")
    runs = RunsOptions(options.rtol, options.atol, options.exact, name, options.names)
    return diff_logs(ref, new, runs)


def diff_models(ref: str, new: str | None, options: DiffOptions) -> DiffResult:
    """Two targets on the reference's batch (`new` None: REF against itself under the
    options' second setting: autocast, compile or deterministic), unjudged."""

    if new is None and options.autocast is None and not options.compile:
        if not options.deterministic:
            raise GradscopeError(
                "give NEW, or --b-autocast/--b-compile/--b-deterministic to compare REF with itself"
            )
    return diff_targets(ref, new, options)
