"""`gradscope inspect` as functions: one instrumented forward+backward of a model, a
target named as on the command line (resolved as the command resolves it), or one step of
a training script."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from gradscope import config, rules
from gradscope.api.arguments import (
    check_model_arguments,
    check_spec,
    kind_of,
    settings_or_default,
    with_batch_kind,
)
from gradscope.api.options import InspectOptions
from gradscope.api.pictures import Plot, inspect_plot
from gradscope.api.resolving import Resolved, resolve
from gradscope.errors import TargetError, UserCodeError
from gradscope.inspector.results import Report

# torch and the inspector (which loads it) are imported in functions: `gradscope --help`
# must not load them


def inspect(
    model: Any,
    batch: Any,
    loss_fn: Callable[[Any], Any] | None = None,
    *,
    grad_outputs: Any = None,
    settings: config.Settings | None = None,
    explain: bool = True,
    label: str | None = None,
    plot: str | None = None,
) -> Report:
    """Run one instrumented forward+backward of `model(batch)` and diagnose it.

    `grad_outputs` weights a non-scalar output (as in `y.backward(weights)`). `plot`: also
    draw the gradient flow to this .png, .svg or .pdf. The model is left exactly as it
    was: hooks, flags, `.grad`, mode, buffers.
    """
    import torch

    from gradscope.inspector import explain as explain_mod
    from gradscope.inspector import probe

    check_model_arguments(model, loss_fn, grad_outputs, label)
    settings = settings_or_default(settings)
    picture = Plot.of(plot)
    try:
        stats = probe.run(model, batch, loss_fn, grad_outputs)
    except UserCodeError as exc:
        raise with_batch_kind(exc, batch) from exc.original
    findings = rules.diagnose(stats, settings)
    if explain and findings:
        findings = explain_mod.enrich(findings, stats, model, batch, loss_fn, grad_outputs)
    report = Report(
        label or type(model).__name__, stats, findings, settings.threshold_dict(), torch.__version__
    )
    return _drawn(report, picture)


def inspect_target(
    spec: str,
    options: InspectOptions | None = None,
    settings: config.Settings | None = None,
    **given: object,
) -> Report:
    """`gradscope inspect SPEC` without the printing: SPEC resolved as the command reads
    it (a model file or class is built with a batch, a training script runs to its step).
    `given`: InspectOptions fields over `options` (explain=False, plot="flow.png")."""

    options = InspectOptions.over(options, given)
    Plot.of(options.plot)  # checked before the target's code runs
    return inspect_resolved(resolve(check_spec(spec), options), options, settings)


def inspect_resolved(
    run: Resolved,
    options: InspectOptions,
    settings: config.Settings | None = None,
    found: Callable[[int, str], None] | None = None,
) -> Report:
    """What `resolve` decided, run: the target's one pass, or the script to its step."""
    if run.target is None:
        return _script(run.spec, options, settings, found)
    t = run.target
    return inspect(
        t.model,
        t.batch,
        t.loss_fn,
        settings=settings,
        explain=options.explain,
        label=t.label,
        plot=options.plot,
    )


def inspect_script(
    path: str | os.PathLike[str],
    argv: Sequence[str] = (),
    settings: config.Settings | None = None,
    *,
    found: Callable[[int, str], None] | None = None,
    **given: object,
) -> Report:
    """Run a training script until the backward of optimizer step `step` and diagnose it.

    `step`: None, the first backward; N >= 1, the backward whose gradients step N applies
    (numbered as `gradscope watch` numbers steps); "first-nonfinite", the first step whose
    loss or gradients are NaN/Inf (the script runs twice). `explain`: the step's forward is
    watched as it runs (a script's forward cannot be replayed) to name the op that made
    NaN/Inf or cut the graph; it costs one watched forward. `found(step, what)`: called
    between the two runs of "first-nonfinite" with the step the first run found.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TargetError(f"the script must be a path to a .py file, not {kind_of(path)}")
    if isinstance(argv, str) or not all(isinstance(a, str) for a in argv):
        raise TargetError(
            f"argv must be a list of strings such as ['--lr', '0.1'], not {kind_of(argv)}"
        )
    options = InspectOptions.over(InspectOptions(script=True, argv=tuple(argv)), given)
    return _script(os.fspath(path), options, settings, found)


def _script(
    path: str,
    options: InspectOptions,
    settings: config.Settings | None,
    found: Callable[[int, str], None] | None,
) -> Report:
    import torch

    from gradscope.distributed.context import env_rank
    from gradscope.inspector import script
    from gradscope.inspector.explain import attach_evidence

    settings = settings_or_default(settings)
    picture = Plot.of(options.plot)
    argv, explain = list(options.argv), options.explain
    inspected = script.run_step(path, argv, options.step, explain=explain, found=found)
    findings = rules.diagnose(inspected.stats, settings)
    if inspected.evidence:
        findings = attach_evidence(findings, inspected.evidence)
    report = Report(
        f"script {path}", inspected.stats, findings, settings.threshold_dict(), torch.__version__
    )
    return _drawn(report, picture if (env_rank() or 0) == 0 else None)  # torchrun: rank 0


def _drawn(report: Report, plot: Plot | None) -> Report:
    if plot is not None:
        inspect_plot(plot, report)
    return report
