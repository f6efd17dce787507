"""Arguments of the wrong kind: a `GradscopeError` with one line that says what was given
and what is wanted (the CLI maps it to exit 2), never a raw AttributeError from deep
inside a pass."""

from __future__ import annotations

from typing import Any

from gradscope import config
from gradscope.errors import ConfigError, TargetError, UserCodeError

# torch and inspector.hooks (which loads it) are imported in functions: `gradscope --help`
# must not load them


def kind_of(value: Any) -> str:
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


def check_model_arguments(model: Any, loss_fn: Any, grad_outputs: Any, label: Any) -> None:
    import torch

    if not isinstance(model, torch.nn.Module):
        hint = (
            ": create an instance first"
            if isinstance(model, type) and issubclass(model, torch.nn.Module)
            else ": wrap it in an nn.Module"
            if callable(model)
            else ""
        )
        raise TargetError(f"model must be a torch.nn.Module, not {kind_of(model)}{hint}")
    if loss_fn is not None and not callable(loss_fn):
        raise TargetError(f"loss_fn must be a callable (output -> loss), not {kind_of(loss_fn)}")
    if grad_outputs is not None and not isinstance(grad_outputs, torch.Tensor):
        raise TargetError(
            f"grad_outputs must be a tensor shaped like the output, not {kind_of(grad_outputs)}"
        )
    if label is not None and not isinstance(label, str):
        raise TargetError(f"label must be a string, not {kind_of(label)}")


def check_spec(spec: Any, what: str = "the target") -> str:
    """A target named as on the command line: a non-empty string."""
    if not isinstance(spec, str) or not spec:
        raise TargetError(
            f"{what} must be a non-empty string such as 'model.py:build' or a built-in "
            f"example name, not {kind_of(spec)}"
        )
    return spec


def settings_or_default(settings: Any) -> config.Settings:
    if settings is None:
        return config.Settings()
    if not isinstance(settings, config.Settings):
        raise ConfigError(
            f"settings must be a gradscope.config.Settings (gradscope.config.load() makes one "
            f"from a file and flags), not {kind_of(settings)}"
        )
    return settings


def with_batch_kind(exc: UserCodeError, batch: Any) -> UserCodeError:
    """A forward that failed on a batch holding no tensor at all: say what the batch was
    (not refused up front: a model may take a graph object, or build its input itself)."""
    from gradscope.inspector.hooks import tensors_in

    if exc.what != "forward pass" or any(True for _ in tensors_in(batch)):
        return exc
    return UserCodeError(f"forward pass on {kind_of(batch)} as the batch", exc.original)
