"""A target's own inputs: its `gradcheck_inputs` called (with the dtype, generator and name
it asks for), and what it returned fitted to the target's signature and named."""

from __future__ import annotations

import inspect
from typing import Any

from gradscope.errors import TargetError, UserCodeError
from gradscope.gradcheck.input_options import InputOptions
from gradscope.gradcheck.results import Note
from gradscope.gradcheck.targets import PROVIDER, Resolved

# torch is imported in functions: `gradscope --help` must not load it

P = inspect.Parameter


def from_provider(
    target: Resolved, options: InputOptions, gen: Any, dtype: Any, notes: list[Note]
) -> tuple[list[tuple[str, Any]], dict[str, Any]] | None:
    """Call the target's gradcheck_inputs and name what it returned by the signature.

    None (the provider returned None: not one of its targets) means: generate them.
    """
    offered = {"dtype": dtype, "generator": gen, "name": target.label.rpartition(":")[2]}
    try:
        accepted = inspect.signature(target.provider).parameters  # type: ignore[arg-type]
        kwargs = {k: v for k, v in offered.items() if k in accepted}
        result = target.provider(**kwargs)  # type: ignore[misc]
    except Exception as exc:
        raise UserCodeError(f"{target.label}: {PROVIDER}()", exc) from exc
    if result is None:
        return None
    args, kw = _call_of(target, result)
    try:
        bound = target.signature.bind(*args, **kw)
    except TypeError as exc:
        raise TargetError(
            f"{target.label}: {PROVIDER}() returned arguments that do not fit "
            f"{target.signature}: {exc}"
        ) from None
    if options.shapes or options.args:
        notes.append(
            Note(
                "options-ignored",
                f"{target.label} provides its own inputs "
                f"({PROVIDER}); --shape/--arg do not apply to it",
            )
        )
    if target.kind == "autograd.Function" and kw:
        bound.apply_defaults()
        args, kw = tuple(bound.args), dict(bound.kwargs)
    return _named(target.signature, args), kw


def _named(sig: inspect.Signature, args: tuple[Any, ...]) -> list[tuple[str, Any]]:
    names: list[str] = []
    for p in sig.parameters.values():
        if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
        elif p.kind is P.VAR_POSITIONAL:
            names += [f"{p.name}[{k}]" for k in range(len(args) - len(names))]
    return list(zip(names, args, strict=False))


def _call_of(target: Resolved, result: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """(args, kwargs) from what gradcheck_inputs returned: a tensor, a dict of keywords, a
    tuple of positional arguments, or (args, kwargs)."""
    import torch

    if isinstance(result, torch.Tensor):
        return (result,), {}
    if isinstance(result, dict):
        return (), dict(result)
    if (
        isinstance(result, (tuple, list))
        and len(result) == 2
        and isinstance(result[0], (tuple, list))
        and isinstance(result[1], dict)
    ):
        return tuple(result[0]), dict(result[1])
    if isinstance(result, (tuple, list)):
        return tuple(result), {}
    raise TargetError(
        f"{target.label}: {PROVIDER}() returned {type(result).__name__}; "
        "expected a tuple of positional arguments, a dict of keyword "
        "arguments, or (args, kwargs)"
    )
