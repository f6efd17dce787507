"""Choice blocks of a one-shot supernet (SPOS, GDAS, ProxylessNAS): a ModuleList of alike
candidates of which the forward calls the one an index picks at run time (`blocks[i](x)`,
`self.ops[index](x)`, a slimmable network's switchable BatchNorm `bn = self.bn[idx]`), so
the one step inspect measures runs the chosen candidate only and the others get no
gradient by design. Read from the forwards above the list: a call of a
module subscripted by a non-constant, with one candidate of the list run."""

from __future__ import annotations

import ast
import inspect
import textwrap

from torch import nn


def names(model: nn.Module, order: dict[str, int]) -> tuple[str, ...]:
    """Candidates that did not run while exactly one sibling of their kind did, in a list
    whose candidates a forward above it calls by a run-time index."""
    out: list[str] = []
    modules = dict(model.named_modules())
    for list_name, holder in modules.items():
        if not isinstance(holder, nn.ModuleList) or len(holder) < 2:
            continue
        full = [f"{list_name}.{i}" if list_name else str(i) for i in range(len(holder))]
        ran = [n for n in full if n in order]
        if len(ran) != 1:
            continue
        kind = type(holder[full.index(ran[0])])
        idle = [n for c, n in zip(holder, full, strict=True) if n not in order and type(c) is kind]
        if idle and any(_calls_by_index(type(m)) for m in _above(modules, list_name)):
            out.extend(idle)
    return tuple(out)


def _above(modules: dict[str, nn.Module], name: str) -> list[nn.Module]:
    """The modules holding `name`, nearest first, up to the root."""
    parts = name.split(".") if name else []
    return [modules[".".join(parts[:k])] for k in range(len(parts) - 1, -1, -1)]


_READ: dict[type[nn.Module], bool] = {}


def _calls_by_index(cls: type[nn.Module]) -> bool:
    """Its forward calls something subscripted by a non-constant: `blocks[i](x)`, or a name
    assigned from such a subscript."""
    if cls not in _READ:
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(cls.forward)))
        except (OSError, TypeError, SyntaxError):
            tree = ast.Module(body=[], type_ignores=[])
        picked = {
            t.id
            for n in ast.walk(tree)
            if isinstance(n, ast.Assign) and _by_index(n.value)
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        _READ[cls] = any(
            isinstance(n, ast.Call)
            and (_by_index(n.func) or (isinstance(n.func, ast.Name) and n.func.id in picked))
            for n in ast.walk(tree)
        )
    return _READ[cls]


def _by_index(expr: ast.AST) -> bool:
    """`blocks[i]`: a subscript by a non-constant (a switchable BatchNorm's `self.bn[idx]`,
    assigned to a name and then called, too)."""
    if not isinstance(expr, ast.Subscript):
        return False
    try:
        ast.literal_eval(expr.slice)  # `[0]`, `[-1]`: always the same candidate
    except ValueError:
        return True
    return False
