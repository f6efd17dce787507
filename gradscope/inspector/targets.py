"""Resolve a target spec to a model, an example batch and an optional loss.

Specs: a built-in example name (`gradscope examples`), `path/file.py[:NAME]`
or `package.module[:NAME]`. NAME (default `gradscope_target`) is a
zero-argument callable returning `(model, batch)`, `(model, batch, loss_fn)`
or a dict with keys `model`, `batch` and optional `loss_fn`; a dict may also be
NAME itself.
"""

from __future__ import annotations

import ast
import importlib
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from gradscope.errors import TargetError, UserCodeError
from gradscope.examples import EXAMPLES
from gradscope.suggest import close_match, did_you_mean

# torch is imported in functions: `gradscope --help` must not load it

DEFAULT_NAME = "gradscope_target"


@dataclass
class Target:
    model: Any
    """An nn.Module."""
    batch: Any
    """A tensor (one positional argument), a tuple/list (positional) or a dict (keywords)."""
    loss_fn: Callable[[Any], Any] | None
    label: str


def split_spec(spec: str) -> tuple[str, str | None]:
    """`a/b.py:name` → (`a/b.py`, `name`); a colon not followed by a name stays in the path."""
    head, sep, tail = spec.rpartition(":")
    if sep and tail.isidentifier() and head:
        return head, tail
    return spec, None


def file_of(spec: str) -> str | None:
    """The .py file a target names ("models/net.py:build" → "models/net.py"), if any."""
    where, _ = split_spec(spec)
    return where if where.endswith(".py") else None


def is_script(spec: str) -> bool:
    """A .py file that does not define `gradscope_target` is a training script.

    Decided from the file's syntax tree, before any of its code runs: importing a
    script would run its training loop (or its argparse) under gradscope's name.
    """
    where, name = split_spec(spec)
    if name is not None or not where.endswith(".py") or not os.path.isfile(where):
        return False
    try:
        with open(where, "rb") as f:
            tree = ast.parse(f.read(), filename=where)
    except (SyntaxError, ValueError, OSError):
        return False  # importing it reports the problem in the usual way
    return DEFAULT_NAME not in top_level_names(tree)


def top_level_names(tree: ast.Module) -> set[str]:
    """Names a module binds at its top level (definitions, assignments, imports)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.If | ast.Try):  # `if TYPE_CHECKING:`, try/except imports
            inner = ast.Module(body=[*node.body, *getattr(node, "orelse", [])], type_ignores=[])
            names |= top_level_names(inner)
    return names


def load(spec: str) -> Target:
    if spec in EXAMPLES:
        return _build(EXAMPLES[spec].factory, f"example {spec}", spec)
    where, name = split_spec(spec)
    module = _import(where)
    attr = name or DEFAULT_NAME
    if not hasattr(module, attr):
        hint = (
            ""
            if name
            else (
                f"; define `{DEFAULT_NAME}()`, name one with {where}:NAME, "
                "or inspect a training script with --script"
            )
        )
        public = [n for n in vars(module) if not n.startswith("_")]
        raise TargetError(f"{where} has no attribute `{attr}`{hint}{did_you_mean(attr, public)}")
    return _build(getattr(module, attr), f"{where}:{attr}", spec)


def _not_python(where: str) -> str:
    """What is true of a target that exists but is no Python file or module: "" if none."""
    if os.path.isdir(where):
        if where.isidentifier() and os.path.isfile(os.path.join(where, "__init__.py")):
            return ""  # a package: imported as one
        has_project = os.path.isfile(os.path.join(where, "pyproject.toml"))
        check = (
            f"; to check the targets its pyproject.toml declares, run `gradscope check` in {where}"
            if has_project
            else ""
        )
        return f"{where} is a folder, not a Python file: name a .py file in it{check}"
    if os.path.isfile(where) and not where.endswith(".py"):
        return (
            f"{where} is not a Python file: name a .py file that defines {DEFAULT_NAME}(), "
            "a module (package.module[:NAME]) or a built-in example (`gradscope examples`)"
        )
    return ""


def _import(where: str) -> ModuleType:
    problem = _not_python(where)
    if problem:
        raise TargetError(problem)
    looks_like_file = where.endswith(".py") or os.sep in where or "/" in where
    if looks_like_file:
        return _import_file(where)
    if not all(part.isidentifier() for part in where.split(".")):
        close = did_you_mean(where, [*EXAMPLES, *_files_beside(where)])
        raise TargetError(
            f"target {where!r} is not a .py file, a module or a built-in example"
            + (close or f" (examples: {', '.join(EXAMPLES)})")
        )
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    _forget_if_stale(where)
    try:
        return importlib.import_module(where)
    except ModuleNotFoundError as exc:
        if exc.name and where.startswith(exc.name):
            raise TargetError(_not_found(where)) from None
        raise UserCodeError(f"importing {where}", exc) from exc
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # SystemExit too: the user's code never picks our exit code
        raise UserCodeError(f"importing {where}", exc) from exc


def _forget_if_stale(name: str) -> None:
    """A top-level module imported earlier in this process from another file than the one
    its name finds on sys.path now (a `model.py` of another folder, in the API or a test
    run): dropped, so the target is built from the file the user points at."""
    old = sys.modules.get(name)
    path = getattr(old, "__file__", None)
    if "." in name or not path:
        return
    found = importlib.machinery.PathFinder.find_spec(name, sys.path)
    if found and found.origin and os.path.abspath(found.origin) != os.path.abspath(path):
        del sys.modules[name]


def _not_found(where: str) -> str:
    """A name that is no file and no module: a misspelt file (`convnet.pyy`) is said to be
    missing as a file, a module as a module; the close match, if any."""
    files = _files_beside(where)
    close = did_you_mean(where, [*files, *EXAMPLES])
    if os.path.splitext(where)[1].lower().startswith(".py") or close_match(where, files):
        return f"{where}: no such file (nor a module of that name){close}"
    return f"no module named {where!r} (looked on sys.path and in {os.getcwd()}){close}"


def _files_beside(path: str) -> list[str]:
    """The Python files in the folder `path` names one in, as they would be typed."""
    folder = os.path.dirname(path)
    try:
        names = sorted(os.listdir(folder or "."))
    except OSError:
        return []
    return [os.path.join(folder, n) if folder else n for n in names if n.endswith(".py")]


def _import_file(path: str) -> ModuleType:
    if not os.path.isfile(path):
        raise TargetError(f"{path}: no such file{did_you_mean(path, _files_beside(path))}")
    full = os.path.abspath(path)
    for folder in (os.getcwd(), os.path.dirname(full)):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    stem = os.path.splitext(os.path.basename(full))[0]
    existing = sys.modules.get(stem)
    if existing is not None and os.path.abspath(getattr(existing, "__file__", "") or "") == full:
        return existing
    name = (
        stem if existing is None and stem.isidentifier() else f"gradscope_target_{abs(hash(full))}"
    )
    spec = importlib.util.spec_from_file_location(name, full)
    if spec is None or spec.loader is None:
        raise TargetError(f"{path}: cannot be imported as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except KeyboardInterrupt:
        del sys.modules[name]
        raise
    except BaseException as exc:
        del sys.modules[name]
        raise UserCodeError(f"importing {path}", exc) from exc
    return module


def _build(obj: Any, label: str, spec: str) -> Target:
    if callable(obj) and not isinstance(obj, dict):
        try:
            obj = obj()
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            raise UserCodeError(f"{label}()", exc) from exc
    return from_value(obj, label)


def from_value(value: Any, label: str) -> Target:
    """Check the factory's result: (model, batch[, loss_fn]) or a dict of those."""
    import torch

    if isinstance(value, dict):
        unknown = set(value) - {"model", "batch", "loss_fn"}
        if "model" not in value or "batch" not in value or unknown:
            raise TargetError(
                f"{label} returned a dict with keys {sorted(value)}; expected "
                "'model', 'batch' and optional 'loss_fn'"
            )
        model, batch, loss_fn = value["model"], value["batch"], value.get("loss_fn")
    elif isinstance(value, (tuple, list)) and len(value) in (2, 3):
        model, batch, loss_fn = (*value, None)[:3]
    elif isinstance(value, torch.nn.Module):
        raise TargetError(
            f"{label} gave the model {type(value).__name__} but no batch: return "
            f"(model, batch), e.g. `return {type(value).__name__}(), torch.randn(32, 20)` with "
            "the batch its forward takes (or run `gradscope inspect` on the class itself, "
            "FILE.py:CLASS, to have a batch built from its first layer)"
        )
    else:
        raise TargetError(
            f"{label} returned {type(value).__name__}; expected (model, batch), "
            "(model, batch, loss_fn) or a dict with 'model' and 'batch'"
        )
    if not isinstance(model, torch.nn.Module):
        raise TargetError(f"{label}: model is {type(model).__name__}, not a torch.nn.Module")
    if not isinstance(batch, (torch.Tensor, tuple, list, Mapping)):  # HF BatchEncoding too
        raise TargetError(
            f"{label}: batch is {type(batch).__name__}; expected a tensor, "
            "a tuple/list of arguments or a dict of keyword arguments"
        )
    if loss_fn is not None and not callable(loss_fn):
        raise TargetError(f"{label}: loss_fn is {type(loss_fn).__name__}, not callable")
    return Target(model, batch, loss_fn, label)


def import_location(where: str) -> ModuleType:
    """A module by dotted name or a .py file by path; TargetError / UserCodeError (exit 2)."""
    return _import(where)
