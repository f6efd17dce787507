"""Layers a forward skips at random in training: LayerDrop (fairseq's and transformers'
`if self.training and torch.rand([]) < self.layerdrop: continue`) leaves a layer out of some
steps, and out of the one step inspect measures, by design; its siblings of the same kind ran.
Read from the forward that skipped it: a loop over layers whose `continue` sits under a test of
a random draw, inside a test of `self.training`."""

from __future__ import annotations

import ast
import inspect
import textwrap

from torch import nn

RANDOM_CALLS = ("rand", "random", "uniform", "bernoulli", "randint", "rand_like")


def names(model: nn.Module, order: dict[str, int]) -> tuple[str, ...]:
    """Modules that never ran while a sibling of their kind did, under a parent whose forward
    skips layers at random in training."""
    out = []
    for parent_name, parent in model.named_modules():
        if not parent.training:
            continue
        for child_name, holder in parent.named_children():
            children = list(holder) if isinstance(holder, nn.ModuleList) else []
            full = [f"{_join(parent_name, child_name)}.{i}" for i in range(len(children))]
            ran = [type(c) for c, n in zip(children, full, strict=True) if n in order]
            skipped = [
                n for c, n in zip(children, full, strict=True) if n not in order and type(c) in ran
            ]
            if skipped and _skips_at_random(type(parent)):
                out.extend(skipped)
    return tuple(out)


def _join(parent: str, child: str) -> str:
    return f"{parent}.{child}" if parent else child


_READ: dict[type[nn.Module], bool] = {}


def _skips_at_random(cls: type[nn.Module]) -> bool:
    if cls not in _READ:
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(cls.forward)))
        except (OSError, TypeError, SyntaxError):
            tree = ast.Module(body=[], type_ignores=[])
        _READ[cls] = any(isinstance(n, ast.For) and _random_continue(n) for n in ast.walk(tree))
    return _READ[cls]


def _random_continue(loop: ast.For) -> bool:
    """Some `continue` of the loop sits under an `if` that tests a random draw (a call, or a
    name the loop assigned from one), inside a test of `self.training`."""
    drawn = {
        t.id
        for n in ast.walk(loop)
        if isinstance(n, ast.Assign) and _draws(n.value)
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    return _under(loop.body, drawn, random=False, training=False)


def _under(body: list[ast.stmt], drawn: set[str], *, random: bool, training: bool) -> bool:
    for stmt in body:
        if isinstance(stmt, ast.Continue) and random and training:
            return True
        if isinstance(stmt, ast.If):
            r = random or _draws(stmt.test) or _reads(stmt.test, drawn)
            tr = training or any(
                isinstance(n, ast.Attribute) and n.attr == "training" for n in ast.walk(stmt.test)
            )
            if _under(stmt.body, drawn, random=r, training=tr):
                return True
    return False


def _draws(expr: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and _called(n) in RANDOM_CALLS for n in ast.walk(expr))


def _reads(expr: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(expr))


def _called(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
