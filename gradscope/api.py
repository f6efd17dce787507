"""The public Python API: everything the CLI does, callable from a test suite.

Arguments of the wrong kind are a `GradscopeError` with one line that says what
was given and what is wanted (the CLI maps it to exit 2), never a raw
AttributeError from deep inside a pass.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from gradscope import config, rules
from gradscope.errors import ConfigError, TargetError, UserCodeError
from gradscope.inspector.results import Report


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

    from gradscope.inspector import explain as explain_mod
    from gradscope.inspector import probe

    _check_arguments(model, loss_fn, grad_outputs, label)
    settings = _settings(settings)
    try:
        stats = probe.run(model, batch, loss_fn, grad_outputs)
    except UserCodeError as exc:
        raise _with_batch_kind(exc, batch) from exc.original
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
    from gradscope.inspector import targets

    if not isinstance(spec, str) or not spec:
        raise TargetError(
            f"the target must be a non-empty string such as 'model.py:build' or a built-in "
            f"example name, not {_kind(spec)}"
        )
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
    path: str | os.PathLike[str],
    argv: Sequence[str] = (),
    settings: config.Settings | None = None,
    *,
    step: int | str | None = None,
    explain: bool = True,
    found: Callable[[int, str], None] | None = None,
) -> Report:
    """Run a training script until the backward of optimizer step `step` and diagnose it.

    `step`: None, the first backward; N >= 1, the backward whose gradients step N applies
    (numbered as `gradscope watch` numbers steps); "first-nonfinite", the first step whose
    loss or gradients are NaN/Inf (the script runs twice). `explain`: the step's forward is
    watched as it runs (a script's forward cannot be replayed) to name the op that made
    NaN/Inf or cut the graph; it costs one watched forward. `found(step, what)`: called
    between the two runs of "first-nonfinite" with the step the first run found.
    """
    import torch

    from gradscope.inspector import script
    from gradscope.inspector.explain import attach_evidence

    if not isinstance(path, (str, os.PathLike)):
        raise TargetError(f"the script must be a path to a .py file, not {_kind(path)}")
    if isinstance(argv, str) or not all(isinstance(a, str) for a in argv):
        raise TargetError(
            f"argv must be a list of strings such as ['--lr', '0.1'], not {_kind(argv)}"
        )
    path = os.fspath(path)
    settings = _settings(settings)
    inspected = script.run_step(path, list(argv), step, explain=explain, found=found)
    findings = rules.diagnose(inspected.stats, settings)
    if inspected.evidence:
        findings = attach_evidence(findings, inspected.evidence)
    return Report(
        f"script {path}",
        inspected.stats,
        findings,
        settings.threshold_dict(),
        torch.__version__,
    )


# --- arguments of the wrong kind -----------------------------------------------------------------


def _kind(value: Any) -> str:
    """What was given, briefly: 'the str 'notamodule'', 'the class Linear', 'a numpy.ndarray'."""
    if value is None:
        return "None"
    if isinstance(value, type):
        return f"the class {value.__name__}"
    kind = type(value)
    name = (
        kind.__qualname__
        if kind.__module__ == "builtins"
        else f"{kind.__module__}.{kind.__qualname__}"
    )
    if isinstance(value, (str, int, float)) and len(repr(value)) <= 40:
        return f"the {name} {value!r}"
    return f"{'an' if name[:1] in 'aeiou' else 'a'} {name}"


def _check_arguments(model: Any, loss_fn: Any, grad_outputs: Any, label: Any) -> None:
    import torch

    if not isinstance(model, torch.nn.Module):
        hint = (
            ": create an instance first"
            if isinstance(model, type) and issubclass(model, torch.nn.Module)
            else ": wrap it in an nn.Module"
            if callable(model)
            else ""
        )
        raise TargetError(f"model must be a torch.nn.Module, not {_kind(model)}{hint}")
    if loss_fn is not None and not callable(loss_fn):
        raise TargetError(f"loss_fn must be a callable (output -> loss), not {_kind(loss_fn)}")
    if grad_outputs is not None and not isinstance(grad_outputs, torch.Tensor):
        raise TargetError(
            f"grad_outputs must be a tensor shaped like the output, not {_kind(grad_outputs)}"
        )
    if label is not None and not isinstance(label, str):
        raise TargetError(f"label must be a string, not {_kind(label)}")


def _settings(settings: Any) -> config.Settings:
    if settings is None:
        return config.Settings()
    if not isinstance(settings, config.Settings):
        raise ConfigError(
            f"settings must be a gradscope.config.Settings (gradscope.config.load() makes one "
            f"from a file and flags), not {_kind(settings)}"
        )
    return settings


def _with_batch_kind(exc: UserCodeError, batch: Any) -> UserCodeError:
    """A forward that failed on a batch holding no tensor at all: say what the batch was
    (not refused up front: a model may take a graph object, or build its input itself)."""
    from gradscope.inspector.hooks import tensors_in

    if exc.what != "forward pass" or any(True for _ in tensors_in(batch)):
        return exc
    return UserCodeError(f"forward pass on {_kind(batch)} as the batch", exc.original)


def watch(**options: Any) -> Any:
    """`with gradscope.watch() as w: train()`, then `w.report`: every optimizer step of
    `train()` judged over time (see gradscope.watcher)."""
    from gradscope.watcher import watch as watch_ctx

    return watch_ctx(**options)


def watch_script(path: str, argv: Sequence[str] = (), **options: Any) -> Any:
    """`gradscope watch PATH -- ARGV` without the printing: the WatchReport."""
    from gradscope.watcher import watch_script as run

    return run(path, list(argv), **options)
