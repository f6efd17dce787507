"""The batch a model class takes, read from its source when the class cannot be built
(its constructor needs arguments): the first layer its `__init__` assigns tells the input,
token ids for an Embedding, features for a Linear. For the `gradscope_target()` that an
error message writes out; no torch, and none of the user's code runs here."""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap

FALLBACK = ("torch.randn(32, 20)", "a batch")
CONTAINERS = frozenset({"Sequential", "ModuleList"})
DEPTH = 3
"""How many classes deep (a block inside the model) the first layer is looked for."""


def batch_from_source(cls: type) -> tuple[str, str]:
    """(the batch as code, what it is) for the class's first layer; FALLBACK when the
    source does not tell."""
    found = _first_layer(cls, "model", DEPTH)
    return found or FALLBACK


def _first_layer(cls: type, path: str, depth: int) -> tuple[str, str] | None:
    init = _init_of(cls)
    if init is None or depth == 0:
        return None
    for node in init.body:
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
            continue
        attr = _self_attribute(node.targets[0])
        if attr is None:
            continue
        call, where = node.value, f"{path}.{attr}"
        if _name(call.func) in CONTAINERS and call.args and isinstance(call.args[0], ast.Call):
            call, where = call.args[0], f"{where}[0]"
        made = _batch(call, where)
        if made is not None:
            return made
        inner = _class_named(cls, _name(call.func))
        if inner is None:  # a module we cannot read: what follows it is not the first
            return None
        return _first_layer(inner, where, depth - 1)
    return None


def _batch(call: ast.Call, where: str) -> tuple[str, str] | None:
    """The batch for a layer call, its sizes as written when they are numbers, else read
    from the built model (`model.emb.num_embeddings`)."""
    kind = _name(call.func)
    first = _argument(call, 0, where)
    if kind in ("Embedding", "EmbeddingBag"):
        return f"torch.randint(0, {first('num_embeddings')}, (2, 8))", "token ids"
    if kind == "Linear":
        return f"torch.randn(2, {first('in_features')})", "a batch"
    if kind in ("Conv1d", "Conv2d", "Conv3d"):
        sizes = ", ".join(["32"] * int(kind[4]))
        return f"torch.randn(2, {first('in_channels')}, {sizes})", "a batch"
    if kind in ("RNN", "LSTM", "GRU"):
        batch_first = any(
            k.arg == "batch_first" and isinstance(k.value, ast.Constant) and k.value.value is True
            for k in call.keywords
        )
        lead = "2, 8" if batch_first else "8, 2"
        return f"torch.randn({lead}, {first('input_size')})", "a sequence"
    return None


def _argument(call: ast.Call, index: int, where: str):
    """The size a layer was given: a number as written, else the built layer's attribute."""

    def read(name: str) -> str:
        given = call.args[index] if len(call.args) > index else None
        given = next((k.value for k in call.keywords if k.arg == name), given)
        if isinstance(given, ast.Constant) and isinstance(given.value, int):
            return str(given.value)
        return f"{where}.{name}"

    return read


def _init_of(cls: type) -> ast.FunctionDef | None:
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError, ValueError):
        return None
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    return next((n for n in body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)


def _self_attribute(target: ast.expr) -> str | None:
    if (
        isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id == "self"
    ):
        return target.attr
    return None


def _name(func: ast.expr) -> str:
    """`nn.Linear` → "Linear", `Block` → "Block"."""
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _class_named(cls: type, name: str) -> type | None:
    """A class of the same module (a block the model builds first), if it is one."""
    found = getattr(sys.modules.get(cls.__module__), name, None)
    return found if isinstance(found, type) else None
