"""`gradscope diff` as one function: two models on one batch, or two runs' `--log` files,
compared; where they first differ."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gradscope import config
from gradscope.api.arguments import check_spec, settings_or_default
from gradscope.api.pictures import Plot, diff_plot
from gradscope.diff import diff_targets
from gradscope.diff.align import load_name_map
from gradscope.diff.runs import RunsOptions, diff_logs
from gradscope.diff.runs import is_log as named_like_a_log
from gradscope.diff.runs.tolerance import RTOL
from gradscope.errors import GradscopeError

if TYPE_CHECKING:
    from gradscope.diff.engine import DiffOptions
    from gradscope.diff.result import DiffResult
    from gradscope.diff.runs.result import RunsDiff

# diff.engine (which loads torch) is imported in functions: `gradscope --help` must not
# load it

AUTOCAST = {"bf16": "bfloat16", "bfloat16": "bfloat16", "fp16": "float16", "float16": "float16"}


def diff(
    ref: str,
    new: str | None = None,
    *,
    settings: config.Settings | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    exact: bool = False,
    name_map: str | None = None,
    plot: str | None = None,
    dtype: str | None = None,
    seed: int = 0,
    allow_transposed: bool = False,
    noise_check: bool = True,
    autocast: str | None = None,
    compile: bool = False,
    deterministic: bool = False,
) -> DiffResult | RunsDiff:
    """`gradscope diff REF NEW` without the printing, its findings judged by `settings`.

    Two `gradscope watch --log` files (.jsonl, .jsonl.gz): the runs compared step by
    step (`dtype`: the one they trained in, when their logs do not say). Else two targets
    (or REF against itself under a second setting: `autocast` "bf16" or "fp16",
    `compile`, `deterministic`), with the options only two models take: seed,
    allow_transposed, noise_check. `plot`: also draw the comparison (.png, .svg, .pdf)."""
    from gradscope.diff.engine import DiffOptions

    settings = settings_or_default(settings)
    picture = Plot.of(plot)
    result: DiffResult | RunsDiff
    if new is not None and (is_log(ref) or is_log(new)):
        result = diff_runs(ref, new, rtol, atol, exact, dtype, name_map)
    else:
        options = DiffOptions(
            rtol=rtol,
            atol=atol,
            exact=exact,
            seed=seed,
            names=load_name_map(name_map) if name_map else DiffOptions().names,
            allow_transposed=allow_transposed,
            noise_check=noise_check,
            autocast=_autocast(autocast),
            compile=compile,
            deterministic=deterministic,
        )
        result = diff_models(check_spec(ref, "REF"), new, options)
    result.findings = settings.judged(result.findings)
    if picture is not None and not getattr(result, "could_not_run", None):
        diff_plot(picture, result)
    return result


def is_log(path: str) -> bool:
    return named_like_a_log(path)


def diff_runs(
    ref: str,
    new: str,
    rtol: float | None = None,
    atol: float | None = None,
    exact: bool = False,
    dtype: str | None = None,
    name_map: str | None = None,
) -> RunsDiff:
    """Two `watch --log` files compared, unjudged."""

    for path in (ref, new):
        if not is_log(path):
            raise GradscopeError(
                f"{path}: to diff two runs give two `gradscope watch --log` files "
                "(.jsonl or .jsonl.gz)"
            )
    name = dtype.lower().removeprefix("torch.") if dtype else None
    if name is not None and name not in RTOL:
        raise GradscopeError(f"--dtype {dtype}: use one of {', '.join(RTOL)}")
    names = load_name_map(name_map) if name_map else RunsOptions().names
    options = RunsOptions(rtol=rtol, atol=atol, exact=exact, dtype=name, names=names)
    return diff_logs(ref, new, options)


def diff_models(ref: str, new: str | None, options: DiffOptions) -> DiffResult:
    """Two targets on the reference's batch (`new` None: REF against itself under the
    options' second setting: autocast, compile or deterministic), unjudged."""

    if new is None and options.autocast is None and not options.compile:
        if not options.deterministic:
            raise GradscopeError(
                "give NEW, or --b-autocast/--b-compile/--b-deterministic to compare REF with itself"
            )
    return diff_targets(ref, new, options)


def _autocast(name: str | None) -> str | None:
    """bf16 or fp16 (or their torch names) as torch names."""
    if name is None:
        return None
    cast = AUTOCAST.get(name.lower())
    if cast is None:
        raise GradscopeError(f"--b-autocast {name}: use bf16 or fp16")
    return cast
