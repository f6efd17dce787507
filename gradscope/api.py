"""The public Python API: everything the CLI does, callable from a test suite."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gradscope import config, rules
from gradscope.results import Report


def inspect(
    model: Any,
    batch: Any,
    loss_fn: Callable[[Any], Any] | None = None,
    *,
    grad_outputs: Any = None,
    settings: config.Settings | None = None,
    explain: bool = True,
    label: str | None = None,
) -> Report:
    """Run one instrumented forward+backward of `model(batch)` and diagnose it.

    `grad_outputs` weights a non-scalar output (as in `y.backward(weights)`).
    The model is left exactly as it was: hooks, flags, `.grad`, mode, buffers.
    """
    import torch

    from gradscope import explain as explain_mod
    from gradscope import probe

    settings = settings or config.Settings()
    stats = probe.run(model, batch, loss_fn, grad_outputs)
    findings = rules.diagnose(stats, settings)
    if explain and findings:
        findings = explain_mod.enrich(findings, stats, model, batch, loss_fn, grad_outputs)
    return Report(
        label or type(model).__name__, stats, findings, settings.threshold_dict(), torch.__version__
    )


def inspect_target(
    spec: str, settings: config.Settings | None = None, explain: bool = True
) -> Report:
    """`gradscope inspect SPEC` without the printing."""
    from gradscope import targets

    target = targets.load(spec)
    return inspect(
        target.model,
        target.batch,
        target.loss_fn,
        settings=settings,
        explain=explain,
        label=target.label,
    )


def inspect_script(
    path: str, argv: Sequence[str] = (), settings: config.Settings | None = None
) -> Report:
    """Run a training script until its first backward, and diagnose that step.

    No explanation passes: a script's forward cannot be replayed on its own.
    """
    import torch

    from gradscope import script

    settings = settings or config.Settings()
    _model, stats = script.run(path, argv)
    return Report(
        f"script {path}",
        stats,
        rules.diagnose(stats, settings),
        settings.threshold_dict(),
        torch.__version__,
    )


def watch(**options: Any) -> Any:
    """`with gradscope.watch() as w: train()`, then `w.report`: every optimizer step of
    `train()` judged over time (see gradscope.watch)."""
    from gradscope.watch import watch as watch_ctx

    return watch_ctx(**options)


def watch_script(path: str, argv: Sequence[str] = (), **options: Any) -> Any:
    """`gradscope watch PATH -- ARGV` without the printing: the WatchReport."""
    from gradscope.watch import watch_script as run

    return run(path, list(argv), **options)
