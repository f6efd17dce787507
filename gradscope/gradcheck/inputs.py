"""Build a target's inputs and reduce it to a function of its differentiable tensors.

Inputs come from the target's `gradcheck_inputs` when it has one, otherwise
from its signature: every parameter without a default becomes a standard-normal
float64 tensor of DEFAULT_SHAPE with requires_grad=True, drawn in signature
order from a generator seeded with `seed`; parameters with defaults keep them;
`--shape NAME=DIMS` and `--arg NAME=VALUE` override one parameter each.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gradscope.errors import ConfigError, TargetError, UserCodeError
from gradscope.gradcheck.results import InputInfo, Note
from gradscope.gradcheck.targets import PROVIDER, Resolved, non_tensor_annotation

DEFAULT_SHAPE = (4, 4)
"""Square, so matrix products of generated inputs are defined (and a transposed gradient is
caught as a wrong value rather than as a shape error)."""
DEFAULT_SEED = 0
DTYPES = ("float64", "float32", "float16", "bfloat16")
_ALIASES = {"double": "float64", "float": "float32", "half": "float16"}
P = inspect.Parameter


@dataclass(frozen=True)
class InputOptions:
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    args: dict[str, Any] = field(default_factory=dict)
    dtype: str | None = None
    """None: float64 for generated inputs, the target's own dtype for provided ones."""
    seed: int = DEFAULT_SEED


def parse_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """`x=3,4` → ("x", (3, 4)); `s=` or `s=()` is a scalar."""
    name, sep, dims = text.partition("=")
    body = dims.strip().strip("()[]").replace("x", ",").replace(" ", "")
    try:
        shape = tuple(int(d) for d in body.split(",") if d)
    except ValueError:
        shape = (-1,)
    if not sep or not name.strip().isidentifier() or any(d < 1 for d in shape):
        raise ConfigError(
            f"--shape {text!r}: expected NAME=DIMS with positive integers, "
            "e.g. --shape x=3,4 (or x= for a scalar)"
        )
    return name.strip(), shape


def parse_arg(text: str) -> tuple[str, Any]:
    """`dim=1` → ("dim", 1); the value is a Python literal, never evaluated as code."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip().isidentifier():
        raise ConfigError(f"--arg {text!r}: expected NAME=VALUE, e.g. --arg dim=1")
    try:
        return name.strip(), ast.literal_eval(value.strip())
    except (ValueError, SyntaxError):
        raise ConfigError(
            f"--arg {text!r}: {value.strip()!r} is not a Python literal "
            f"(numbers, True/False/None, quoted strings, lists, dicts; e.g. "
            f"--arg {name.strip()}=\"'{value.strip()}'\")"
        ) from None


def parse_dtype(text: str) -> str:
    name = _ALIASES.get(
        text.strip().lower().removeprefix("torch."), text.strip().lower().removeprefix("torch.")
    )
    if name not in DTYPES:
        raise ConfigError(f"--dtype {text!r}: expected one of {', '.join(DTYPES)}")
    return name


@dataclass
class Problem:
    """A target as a function of its differentiable tensors, with names for reports."""

    label: str
    kind: str
    fn: Callable[..., list[Any]]
    """Differentiable tensors, in `infos` order → the floating-point outputs, flattened."""
    inputs: list[Any]
    """Base values (detached copies): every evaluation starts from these."""
    infos: list[InputInfo]
    function: Any = None
    """The torch.autograd.Function class, for Function targets."""
    call: list[tuple[str, bool]] = field(default_factory=list)
    """(name, is a differentiable tensor) for each argument of the call, in order."""
    output_names: list[str] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)


def build(target: Resolved, options: InputOptions) -> Problem:
    import torch

    dtype = getattr(torch, options.dtype or "float64")
    gen = torch.Generator().manual_seed(options.seed)
    notes: list[Note] = []
    if target.kind == "module":
        target.obj.to(dtype)
    provided = _provided(target, options, gen, dtype, notes) if target.provider else None
    pos, kw = provided if provided is not None else _generated(target, options, gen, dtype)
    if target.kind == "autograd.Function" and kw:
        raise TargetError(
            f"{target.label}: Function.apply takes positional arguments only; "
            f"cannot pass {', '.join(kw)}"
        )
    slots, infos, base = _differentiable(target, pos, kw, notes)
    if not base:
        raise TargetError(
            f"{target.label}: no floating-point tensor input requires grad, so "
            "there is no gradient to check"
        )
    call = [(name, any(s == ("pos", i) for s in slots)) for i, (name, _) in enumerate(pos)]
    problem = Problem(
        target.label,
        target.kind,
        lambda *t: [],
        base,
        infos,
        target.obj if target.kind == "autograd.Function" else None,
        call,
        notes=notes,
    )
    problem.fn = _make_fn(target, problem, [v for _, v in pos], kw, slots)
    return problem


def _tensor(shape: tuple[int, ...], gen: Any, dtype: Any) -> Any:
    import torch

    return torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype).requires_grad_()


def _generated(
    target: Resolved, options: InputOptions, gen: Any, dtype: Any
) -> tuple[list[tuple[str, Any]], dict[str, Any]]:
    """Signature → values: --arg, --shape, the default, or a generated tensor."""
    pos: list[tuple[str, Any, bool]] = []
    kw: dict[str, Any] = {}
    keep_defaults = target.kind == "autograd.Function"  # apply() is positional only
    skipped = False
    for p in target.signature.parameters.values():
        if p.kind in (P.VAR_POSITIONAL, P.VAR_KEYWORD):
            continue
        default = False
        if p.name in options.args:
            value = options.args[p.name]
        elif p.name in options.shapes:
            value = _tensor(options.shapes[p.name], gen, dtype)
        elif p.default is not P.empty:
            if not keep_defaults:
                skipped = True
                continue
            value, default = p.default, True
        elif non_tensor_annotation(p):
            raise TargetError(
                f"{target.label}: parameter `{p.name}` "
                f"({non_tensor_annotation(p)}) has no default; pass "
                f"--arg {p.name}=VALUE"
            )
        else:
            value = _tensor(DEFAULT_SHAPE, gen, dtype)
        if p.kind is P.KEYWORD_ONLY or skipped:
            kw[p.name] = value
        else:
            pos.append((p.name, value, default))
    while pos and pos[-1][2]:
        pos.pop()
    extra = {
        k: v
        for k, v in options.args.items()
        if k not in target.signature.parameters and target.accepts(k)
    }
    return [(n, v) for n, v, _ in pos], {**kw, **extra}


def _provided(
    target: Resolved, options: InputOptions, gen: Any, dtype: Any, notes: list[Note]
) -> tuple[list[tuple[str, Any]], dict[str, Any]] | None:
    """Call the target's gradcheck_inputs and name what it returned by the signature.

    None (the provider returned None: not one of its targets) means: generate them.
    """
    import torch

    offered = {"dtype": dtype, "generator": gen, "name": target.label.rpartition(":")[2]}
    try:
        accepted = inspect.signature(target.provider).parameters  # type: ignore[arg-type]
        kwargs = {k: v for k, v in offered.items() if k in accepted}
        result = target.provider(**kwargs)  # type: ignore[misc]
    except Exception as exc:
        raise UserCodeError(f"{target.label}: {PROVIDER}()", exc) from exc
    if result is None:
        return None
    if isinstance(result, torch.Tensor):
        args, kw = (result,), {}
    elif isinstance(result, dict):
        args, kw = (), dict(result)
    elif (
        isinstance(result, (tuple, list))
        and len(result) == 2
        and isinstance(result[0], (tuple, list))
        and isinstance(result[1], dict)
    ):
        args, kw = tuple(result[0]), dict(result[1])
    elif isinstance(result, (tuple, list)):
        args, kw = tuple(result), {}
    else:
        raise TargetError(
            f"{target.label}: {PROVIDER}() returned {type(result).__name__}; "
            "expected a tuple of positional arguments, a dict of keyword "
            "arguments, or (args, kwargs)"
        )
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
    return _name_positional(target.signature, args), kw


def _name_positional(sig: inspect.Signature, args: tuple[Any, ...]) -> list[tuple[str, Any]]:
    names: list[str] = []
    for p in sig.parameters.values():
        if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
        elif p.kind is P.VAR_POSITIONAL:
            names += [f"{p.name}[{k}]" for k in range(len(args) - len(names))]
    return list(zip(names, args, strict=False))


def _differentiable(
    target: Resolved, pos: list[tuple[str, Any]], kw: dict[str, Any], notes: list[Note]
) -> tuple[list[tuple[str, Any]], list[InputInfo], list[Any]]:
    """The floating tensors to differentiate: requires_grad ones (all, if none is marked)."""
    import torch

    found = [(("pos", i), name, i, v) for i, (name, v) in enumerate(pos)]
    found += [(("kw", name), name, None, v) for name, v in kw.items()]
    found = [f for f in found if isinstance(f[3], torch.Tensor) and f[3].is_floating_point()]
    chosen = [f for f in found if f[3].requires_grad]
    if found and not chosen:
        notes.append(
            Note(
                "no-requires-grad",
                f"{PROVIDER}() marked no tensor requires_grad=True;"
                " checking every floating-point tensor input",
            )
        )
        chosen = found
    if target.kind == "module":
        chosen += [
            (("param", n), n, None, p) for n, p in target.obj.named_parameters() if p.requires_grad
        ]
    infos = [
        InputInfo(
            name,
            position,
            "parameter"
            if slot[0] == "param"
            else ("keyword" if position is None else "positional"),
            tuple(v.shape),
            str(v.dtype).removeprefix("torch."),
        )
        for slot, name, position, v in chosen
    ]
    return [c[0] for c in chosen], infos, [c[3].detach().clone() for c in chosen]


def _make_fn(
    target: Resolved,
    problem: Problem,
    args: list[Any],
    kw: dict[str, Any],
    slots: list[tuple[str, Any]],
) -> Callable[..., list[Any]]:
    invoke = _invoker(target)

    def fn(*tensors: Any) -> list[Any]:
        call_args, call_kw, params = list(args), dict(kw), {}
        for (where, key), t in zip(slots, tensors, strict=False):
            if where == "pos":
                call_args[key] = t
            elif where == "kw":
                call_kw[key] = t
            else:
                params[key] = t
        names, outs = flatten(invoke(call_args, call_kw, params))
        if not problem.output_names:
            problem.output_names[:] = names
        elif names != problem.output_names:
            raise RuntimeError(
                f"the target returned outputs {names} after {problem.output_names}"
                "; a gradcheck needs the same outputs on every call"
            )
        return outs

    return fn


def _invoker(target: Resolved) -> Callable[[list[Any], dict[str, Any], dict[str, Any]], Any]:
    obj = target.obj
    if target.kind == "autograd.Function":
        return lambda a, k, p: obj.apply(*a)
    if target.kind == "module":
        from torch.func import functional_call

        return lambda a, k, p: functional_call(obj, p, tuple(a), k)
    return lambda a, k, p: obj(*a, **k)


def flatten(out: Any) -> tuple[list[str], list[Any]]:
    """Floating-point tensors of a (nested) output, named `out`, `out[1]`, `out['loss']`."""
    import torch

    names: list[str] = []
    tensors: list[Any] = []
    stack: list[tuple[str, Any]] = [("out", out)]
    while stack:
        name, value = stack.pop()
        if isinstance(value, torch.Tensor):
            if value.is_floating_point():
                names.append(name)
                tensors.append(value)
        elif isinstance(value, dict):
            stack += reversed([(f"{name}[{k!r}]", v) for k, v in value.items()])
        elif isinstance(value, (tuple, list)):
            stack += reversed([(f"{name}[{k}]", v) for k, v in enumerate(value)])
    return names, tensors
