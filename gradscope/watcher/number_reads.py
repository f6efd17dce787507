"""A parameter an installed library's module reads only as a Python number: every read of
`self.<name>` in its class's source sits under `.item()`, `.tolist()` or `float()` /
`int()`. normflows' iResBlock (flows/residual.py, after the residual-flows reference code)
keeps its Russian-roulette estimator's geom_p and lamb as nn.Parameters and reads them as
`torch.sigmoid(self.geom_p).item()` and `self.lamb.item()` to draw the series' length: they
are settings, never in the loss's graph, so no gradient ever reaches them by design.

Read from the class's source (its AST), once per class and name, at report time, only for
a parameter that got no gradient and whose holder is an installed package's class: nothing
at the steps. A source that cannot be read, a name read any other way, or a name never read
through `self` is not told so."""

from __future__ import annotations

import ast
import inspect
import textwrap
from functools import lru_cache

_TO_NUMBER = frozenset({"item", "tolist"})
_NUMBER_CALLS = frozenset({"float", "int", "bool"})


def read_as_number(cls: type, name: str) -> bool:
    """Every read of `self.<name>` in the source of cls and its bases (torch's excepted) is
    turned into a Python number, and there is at least one."""
    try:
        return _reads(cls, name)
    except (OSError, TypeError, SyntaxError, ValueError, RecursionError):
        return False


@lru_cache(maxsize=64)
def _reads(cls: type, name: str) -> bool:
    reads = 0
    for base in cls.__mro__:
        if base is object or base.__module__.split(".")[0] == "torch":
            continue
        tree = ast.parse(textwrap.dedent(inspect.getsource(base)))
        parents = {c: n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
        for node in ast.walk(tree):
            if _self_read(node, name):
                if not _to_number(node, parents):
                    return False
                reads += 1
            elif isinstance(node, ast.Constant) and node.value == name:
                return False  # getattr(self, "name"): a read not followed here
    return reads > 0


def _self_read(node: ast.AST, name: str) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == name
        and isinstance(node.ctx, ast.Load)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    )


def _to_number(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """An expression above node, within its statement, makes it a Python number."""
    child, up = node, parents.get(node)
    while up is not None and not isinstance(up, ast.stmt):
        if isinstance(up, ast.Attribute) and up.attr in _TO_NUMBER and up.value is child:
            return True
        if (
            isinstance(up, ast.Call)
            and isinstance(up.func, ast.Name)
            and up.func.id in _NUMBER_CALLS
            and child in up.args
        ):
            return True
        child, up = up, parents.get(up)
    return False
