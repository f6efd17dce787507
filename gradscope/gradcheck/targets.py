"""Resolve a gradcheck SPEC to something callable and read the signature it is called with.

A SPEC is `package.module:Name` or `path/file.py:Name` (without `:Name`, every
torch.autograd.Function subclass defined in that module), or the bare name of a
built-in example in `gradscope.examples.functions`. Name is a
torch.autograd.Function subclass (called through `.apply`), a plain function of
tensors, or an nn.Module: a class constructible without arguments, a
zero-argument factory, or an instance (deep-copied, so the user's is never
changed).
"""

from __future__ import annotations

import ast
import copy
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from gradscope.errors import TargetError, UserCodeError
from gradscope.inspector.targets import import_location

# torch is imported in functions: `gradscope --help` must not load it

PROVIDER = "gradcheck_inputs"
"""The input convention: a callable on the target, or beside it in its module."""
EXAMPLES_MODULE = "gradscope.examples.functions"
_NON_TENSOR = {
    "int",
    "float",
    "bool",
    "str",
    "complex",
    "bytes",
    "list",
    "tuple",
    "dict",
    "Callable",
    "callable",
    "Sequence",
    "Literal",
}


@dataclass
class Resolved:
    """A target, ready to have its inputs built."""

    label: str
    kind: str
    """autograd.Function, function or module."""
    obj: Any
    """The Function class, the function, or our own copy of the nn.Module."""
    signature: inspect.Signature
    """forward without ctx, the function's, or module.forward's."""
    provider: Callable[..., Any] | None
    """The target's `gradcheck_inputs`, if it has one."""

    def accepts(self, name: str) -> bool:
        params = self.signature.parameters.values()
        return name in self.signature.parameters or any(
            p.kind is inspect.Parameter.VAR_KEYWORD for p in params
        )


def split(spec: str) -> tuple[str, str | None]:
    """`a/b.py:Name` → (`a/b.py`, `Name`); dotted names (`mod:Class.attr`) are allowed."""
    head, sep, tail = spec.rpartition(":")
    if sep and head and all(part.isidentifier() for part in tail.split(".")):
        return head, tail
    return spec, None


def resolve(spec: str) -> list[Resolved]:
    """SPEC → targets; TargetError (exit 2) when it names nothing gradscope can check."""
    where, name = split(spec)
    if name is None and spec.isidentifier():
        examples = import_location(EXAMPLES_MODULE)
        if spec in getattr(examples, "__all__", ()):
            return [resolve_object(getattr(examples, spec), spec, examples)]
    module = import_location(where)
    if name is None:
        found = [
            (n, v)
            for n, v in vars(module).items()
            if _is_function_class(v) and getattr(v, "__module__", None) == module.__name__
        ]
        if not found:
            raise TargetError(
                f"{where} defines no torch.autograd.Function subclass; name the "
                f"target with {where}:NAME"
            )
        return [resolve_object(v, f"{where}:{n}", module) for n, v in found]
    obj: Any = module
    for part in name.split("."):
        if not hasattr(obj, part):
            raise TargetError(f"{where} has no attribute `{name}`")
        obj = getattr(obj, part)
    return [resolve_object(obj, spec, module)]


def _is_function_class(obj: Any) -> bool:
    import torch

    return (
        isinstance(obj, type)
        and issubclass(obj, torch.autograd.Function)
        and obj is not torch.autograd.Function
    )


def resolve_object(obj: Any, label: str, module: ModuleType | None = None) -> Resolved:
    """A Python object → Resolved; the Python API (`gradscope.gradcheck.check`) starts here."""
    import torch

    if inspect.ismethod(obj) and obj.__name__ == "apply" and _is_function_class(obj.__self__):
        obj = obj.__self__  # `MyFn.apply`, as torch.autograd.gradcheck is called
    provider = _provider(obj, module)
    if _is_function_class(obj):
        return Resolved(label, "autograd.Function", obj, function_signature(obj, label), provider)
    if isinstance(obj, type) and issubclass(obj, torch.nn.Module):
        model = _construct(obj, label)
    elif isinstance(obj, torch.nn.Module):
        model = copy.deepcopy(obj)
    elif callable(obj) and not isinstance(obj, type):
        sig = signature(obj, label)
        own = callable(getattr(obj, PROVIDER, None))
        if own or any(_required(p) for p in sig.parameters.values()):
            return Resolved(label, "function", obj, sig, provider)
        model = _call_factory(obj, label)
    else:
        raise TargetError(
            f"{label} is {type(obj).__name__}, not a torch.autograd.Function "
            "subclass, a function of tensors or an nn.Module"
        )
    model.eval()  # Dropout off: a gradcheck needs a deterministic function
    return Resolved(label, "module", model, signature(model.forward, label), provider)


def _provider(obj: Any, module: ModuleType | None) -> Callable[..., Any] | None:
    own = getattr(obj, PROVIDER, None)
    if callable(own):
        return own
    beside = getattr(module, PROVIDER, None) if module is not None else None
    return beside if callable(beside) else None


def _construct(cls: type, label: str) -> Any:
    try:
        sig = inspect.signature(cls)
    except (TypeError, ValueError):
        sig = None
    if sig is not None and any(_required(p) for p in sig.parameters.values()):
        raise TargetError(
            f"{label}: the module's constructor needs arguments; name a "
            "zero-argument factory that returns the module instead"
        )
    try:
        return cls()
    except Exception as exc:
        raise UserCodeError(f"{label}()", exc) from exc


def _call_factory(factory: Callable[[], Any], label: str) -> Any:
    import torch

    try:
        made = factory()
    except Exception as exc:
        raise UserCodeError(f"{label}()", exc) from exc
    if not isinstance(made, torch.nn.Module):
        raise TargetError(
            f"{label} takes no required arguments, so it was called as an "
            f"nn.Module factory, but it returned {type(made).__name__}; give it a "
            f"`{PROVIDER}` if it is a function of tensors"
        )
    return made


def _required(p: inspect.Parameter) -> bool:
    return p.default is inspect.Parameter.empty and p.kind not in (
        inspect.Parameter.VAR_POSITIONAL,
        inspect.Parameter.VAR_KEYWORD,
    )


def function_signature(cls: Any, label: str) -> inspect.Signature:
    """forward's signature as `.apply` sees it: without ctx (unless setup_context is used)."""
    import torch

    if getattr(cls.forward, "__func__", cls.forward) is getattr(
        torch.autograd.Function.forward, "__func__", torch.autograd.Function.forward
    ):
        raise TargetError(f"{label} does not define forward")
    sig = signature(cls.forward, label)
    params = list(sig.parameters.values())
    if not uses_setup_context(cls) and params:
        params = params[1:]
    return sig.replace(parameters=params)


def uses_setup_context(cls: Any) -> bool:
    """New-style Functions: forward(*args) without ctx, plus a setup_context staticmethod."""
    try:
        from torch.autograd.function import _is_setup_context_defined

        return bool(_is_setup_context_defined(cls.setup_context))
    except ImportError:  # pragma: no cover - older torch
        return False


def defines(cls: Any, method: str) -> bool:
    """Whether a Function subclass overrides `method` (jvp, vmap ...)."""
    import torch

    if not _is_function_class(cls):
        return False
    mine = getattr(getattr(cls, method, None), "__func__", getattr(cls, method, None))
    base = getattr(torch.autograd.Function, method, None)
    return mine is not getattr(base, "__func__", base)


def signature(func: Any, label: str) -> inspect.Signature:
    """inspect.signature, or for a torch builtin the one its docstring opens with."""
    try:
        return inspect.signature(func)
    except (TypeError, ValueError):
        pass
    parsed = _doc_signature(getattr(func, "__doc__", None) or "")
    if parsed is None:
        raise TargetError(
            f"{label}: cannot read its signature; give it a `{PROVIDER}` "
            "(see docs/gradcheck.md) or wrap it in a Python function"
        )
    return parsed


def _doc_signature(doc: str) -> inspect.Signature | None:
    """`gelu(input, approximate = 'none') -> Tensor` → a Signature (parsed, never run)."""
    first = doc.strip().splitlines()[0] if doc.strip() else ""
    match = re.match(r"\s*\w+\((.*)\)", first)
    if not match:
        return None
    try:
        args = ast.parse(f"def _f({match.group(1)}): pass").body[0].args  # type: ignore[attr-defined]
    except SyntaxError:
        return None
    P = inspect.Parameter
    params: list[inspect.Parameter] = []
    groups = [(args.posonlyargs, P.POSITIONAL_ONLY), (args.args, P.POSITIONAL_OR_KEYWORD)]
    positional = [(a, kind) for group, kind in groups for a in group]
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    for (a, kind), default in zip(positional, defaults, strict=False):
        params.append(P(a.arg, kind, default=P.empty if default is None else _literal(default)))
    if args.vararg:
        params.append(P(args.vararg.arg, P.VAR_POSITIONAL))
    for a, default in zip(args.kwonlyargs, args.kw_defaults, strict=False):
        params.append(
            P(a.arg, P.KEYWORD_ONLY, default=P.empty if default is None else _literal(default))
        )
    return inspect.Signature(params)


def _literal(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError:
        return None


def non_tensor_annotation(p: inspect.Parameter) -> str | None:
    """`int` for `dim: int`: a parameter that must not get a generated tensor."""
    ann = p.annotation
    if ann is inspect.Parameter.empty:
        return None
    text = ann if isinstance(ann, str) else getattr(ann, "__name__", str(ann))
    head = text.replace("typing.", "").split("[")[0].split("|")[0].strip()
    return head if head in _NON_TENSOR else None
