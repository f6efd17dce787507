"""A target that gives a model class but no batch: most people's `model.py`, or
`model.py:Net`. Build the class with no arguments and, where its first layer tells the
input (Linear, Conv, Embedding, RNN), a batch; say which. Else say what to write: the
three-line `gradscope_target()` filled in for their class.

A file is a model file, not a training script, when it defines an `nn.Module` subclass
and never calls backward, step, fit, train or main (decided from its syntax tree, before
any of its code runs): importing it then only defines classes.
"""

from __future__ import annotations

import ast
import inspect
import os
from dataclasses import dataclass
from typing import Any

from gradscope.errors import TargetError, UserCodeError
from gradscope.inspector.first_layer import batch_from_source
from gradscope.inspector.targets import (
    DEFAULT_NAME,
    Target,
    import_location,
    load,
    split_spec,
    top_level_names,
)

# torch is imported in functions: `gradscope --help` must not load it

TRAINING_CALLS = frozenset({"backward", "step", "fit", "train"})
"""Attribute calls that make a file a training script (`loss.backward()`, `opt.step()`)."""
ENTRY_CALLS = frozenset({"fit", "train", "main"})
"""Plain calls that do too: a loop imported from elsewhere (`main()`, `train(model)`)."""


@dataclass(frozen=True)
class Built:
    target: Target
    note: str
    """What was built, for a line on stderr."""


def prepare(spec: str) -> Built | None:
    """A target for `spec` when it names a model file or a Module class; else None (the
    usual target or script rules apply)."""
    where, name = split_spec(spec)
    if name is None:
        classes = model_classes(where)
        if not classes:
            return None
        module = import_location(where)
        found = [getattr(module, c) for c in classes if isinstance(getattr(module, c, None), type)]
        return _pick(found, where)
    if not (where.endswith(".py") and name in model_classes(where, any_file=True)):
        return None
    cls = getattr(import_location(where), name, None)
    return _from_class(cls, f"{where}:{name}") if isinstance(cls, type) else None


def resolve(spec: str) -> Built:
    """What a target spec names, the way `inspect` reads it: a model file or class built
    with a batch (the note says what was built), else the usual target (no note). Every
    command that takes a TARGET but no script resolves it here."""
    built = prepare(spec)
    return built if built is not None else Built(load(spec), "")


def model_classes(path: str, any_file: bool = False) -> list[str]:
    """The nn.Module subclasses a model file defines, in order; [] for anything else (a
    script, a file with gradscope_target(), not a .py file). `any_file`: list them even
    in a file that also trains or has a gradscope_target (for `file.py:Class`)."""
    if not path.endswith(".py") or not os.path.isfile(path):
        return []
    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read(), filename=path)
    except (SyntaxError, ValueError, OSError):
        return []
    if not any_file and (DEFAULT_NAME in top_level_names(tree) or _trains(tree)):
        return []
    return [
        node.name
        for node in tree.body
        if isinstance(node, ast.ClassDef) and any(_is_module_base(b) for b in node.bases)
    ]


def _is_module_base(base: ast.expr) -> bool:
    """`nn.Module`, `torch.nn.Module`, `Module`: the base names a Module subclass."""
    name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
    return name == "Module"


def _trains(tree: ast.Module) -> bool:
    for n in ast.walk(tree):
        if not isinstance(n, ast.Call):
            continue
        if isinstance(n.func, ast.Attribute) and n.func.attr in TRAINING_CALLS:
            return True
        if isinstance(n.func, ast.Name) and n.func.id in ENTRY_CALLS:
            return True
    return False


def _pick(classes: list[type], where: str) -> Built:
    """The class that builds with no arguments and holds the most parameters (the whole
    model, not one of its blocks); a batch for it, or what to write."""
    import torch

    built = []
    for cls in classes:
        try:
            torch.manual_seed(0)
            model = cls()
        except Exception:  # needs arguments: not the one to build
            continue
        built.append((sum(p.numel() for p in model.parameters()), model))
    if not built:
        raise TargetError(_cannot_build(classes[-1], where, "needs arguments"))
    model = max(built, key=lambda pair: pair[0])[1]
    name = type(model).__name__
    return _with_batch(model, f"{where}:{name}", where, f"{where} defines no {DEFAULT_NAME}()")


def _from_class(cls: Any, label: str) -> Built:
    import torch

    if not issubclass(cls, torch.nn.Module):
        raise TargetError(f"{label} is a class, not an nn.Module or a gradscope_target()")
    try:
        torch.manual_seed(0)
        model = cls()
    except Exception as exc:
        raise TargetError(
            _cannot_build(cls, label.rpartition(":")[0], f"needs arguments ({exc})")
        ) from None
    return _with_batch(model, label, label.rpartition(":")[0], f"{label} is a class")


def _with_batch(model: Any, label: str, where: str, said: str) -> Built:
    name = type(model).__name__
    made = example_batch(model)
    if made is None:
        why = "its first layer does not tell the input it takes"
        raise TargetError(_cannot_build(type(model), where, why))
    batch, text, layer = made
    problem = _forward_fails(model, batch)
    if problem:
        why = f"its forward failed on {text}, a batch built from {layer}: {problem}"
        raise TargetError(_cannot_build(type(model), where, why, text))
    note = (
        f"{said}: inspecting {name}() on {text}, a batch "
        f"built from its first layer {layer}; define {DEFAULT_NAME}() to choose the batch "
        "and the loss (docs/inspect.md)"
    )
    return Built(Target(model, batch, None, label), note)


def example_batch(model: Any) -> tuple[Any, str, str] | None:
    """(batch, how it reads as code, the layer it came from) from the first layer whose
    parameters say what it takes, or None."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    for module in model.modules():
        if isinstance(module, nn.Linear) and not isinstance(module, nn.LazyLinear):
            n = module.in_features
            return torch.randn(2, n), f"torch.randn(2, {n})", f"Linear(in_features={n})"
        lazy = isinstance(module, nn.modules.lazy.LazyModuleMixin)
        if isinstance(module, nn.modules.conv._ConvNd) and not lazy:
            dims = len(module.kernel_size)
            shape = (2, module.in_channels, *[32] * dims)
            kind = type(module).__name__
            text = f"torch.randn{shape}"
            return torch.randn(shape), text, f"{kind}(in_channels={module.in_channels})"
        if isinstance(module, nn.Embedding | nn.EmbeddingBag):
            n = module.num_embeddings
            text = f"torch.randint(0, {n}, (2, 8))"
            return torch.randint(0, n, (2, 8)), text, f"Embedding({n}, {module.embedding_dim})"
        if isinstance(module, nn.RNNBase):
            shape = (2, 8, module.input_size) if module.batch_first else (8, 2, module.input_size)
            text = f"torch.randn{shape}"
            return torch.randn(shape), text, f"{type(module).__name__}({module.input_size}, ...)"
    return None


def _forward_fails(model: Any, batch: Any) -> str:
    """One forward in eval mode without gradients (no running statistics moved): the
    error's first line, or ""."""
    import torch

    was = model.training
    model.eval()
    try:
        with torch.no_grad():
            model(batch)
    except Exception as exc:
        return f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"
    except BaseException as exc:  # sys.exit in their forward: their code, never our exit
        raise UserCodeError(f"{type(model).__name__}.forward", exc) from exc
    finally:
        model.train(was)
    return ""


def _cannot_build(cls: type, where: str, why: str, batch: str | None = None) -> str:
    """One line that says what is true, then the function to write, filled in: the
    constructor's required parameters named, and a batch as its first layer takes it."""
    name = cls.__name__
    needed = required_parameters(cls)
    arguments = ", ".join(f"{p}=..." for p in needed)
    fill = "  # fill in its arguments" if needed else ""
    batch, what = (batch, "a batch") if batch else batch_from_source(cls)
    return (
        f"{where} defines {name} but no {DEFAULT_NAME}(), and {name}() cannot be inspected "
        f"as it is: {why}. Add to {where}:\n\n"
        f"    import torch\n\n"
        f"    def {DEFAULT_NAME}():\n"
        f"        model = {name}({arguments}){fill}\n"
        f"        return model, {batch}  # {what} as {name}.forward takes it\n"
    )


def required_parameters(cls: type) -> list[str]:
    """The constructor's parameters that have no default (not *args, **kwargs)."""
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):
        return []
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [
        p.name
        for p in signature.parameters.values()
        if p.kind in kinds and p.default is inspect.Parameter.empty
    ]
