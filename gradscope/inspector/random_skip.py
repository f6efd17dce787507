"""Layers a forward skips at random in training: LayerDrop (fairseq's and transformers'
`if self.training and torch.rand([]) < self.layerdrop: continue`) leaves a layer out of some
steps, and out of the one step inspect measures, by design; its siblings of the same kind ran.
Read from the forward that skipped it: a loop over layers whose `continue` sits under a test of
a random draw, inside a test of `self.training`; or a block's own forward that returns early
so (stochastic depth, Huang et al. 2016), its layers not run while a block of its kind's did."""

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
    out.extend(_returned_early(model, order))
    return tuple(out)


def _returned_early(model: nn.Module, order: dict[str, int]) -> list[str]:
    """Blocks that ran but none of whose layers did, whose own forward returns early under a
    test of a random draw inside a test of `self.training` (stochastic depth's `if
    self.training and torch.rand(1) < p: return x`), while a block of their kind ran its
    layers."""
    ran_inside = {n.rsplit(".", 1)[0] for n in order if "." in n}
    found = []
    for name, block in model.named_modules():
        children = [_join(name, c) for c, _ in block.named_children()]
        if name not in order or not children or any(c in order for c in children):
            continue
        alike = any(type(m) is type(block) and n in ran_inside for n, m in model.named_modules())
        if alike and _returns_at_random(type(block)):
            found.append(name)
    return found


def _join(parent: str, child: str) -> str:
    return f"{parent}.{child}" if parent else child


_READ: dict[type[nn.Module], bool] = {}


def _forward_tree(cls: type[nn.Module]) -> ast.Module:
    """The forward's syntax tree, with those of the class's methods it calls on self
    (fairseq's wav2vec 2.0 encoder loops over its layers in `extract_features`)."""
    tree = _tree(cls.forward)
    called = {
        n.func.attr
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and isinstance(n.func.value, ast.Name)
        and n.func.value.id == "self"
    }
    for name in sorted(called - {"forward"}):
        method = getattr(cls, name, None)
        if inspect.isfunction(method):
            tree.body.extend(_tree(method).body)
    return tree


def _tree(function: object) -> ast.Module:
    try:
        return ast.parse(textwrap.dedent(inspect.getsource(function)))  # type: ignore[arg-type]
    except (OSError, TypeError, SyntaxError):
        return ast.Module(body=[], type_ignores=[])


def _skips_at_random(cls: type[nn.Module]) -> bool:
    if cls not in _READ:
        tree = _forward_tree(cls)
        _READ[cls] = any(
            isinstance(n, ast.For) and (_random_continue(n) or _random_call(n))
            for n in ast.walk(tree)
        )
    return _READ[cls]


_RETURNS: dict[type[nn.Module], bool] = {}


def _returns_at_random(cls: type[nn.Module]) -> bool:
    """Its forward returns under an `if` that tests a random draw, inside a test of
    `self.training`."""
    if cls not in _RETURNS:
        body = [n for n in ast.walk(_forward_tree(cls)) if isinstance(n, ast.FunctionDef)]
        drawn = _drawn(body[0]) if body else set()
        _RETURNS[cls] = bool(body) and _under(
            body[0].body, drawn, random=False, training=False, stop=ast.Return
        )
    return _RETURNS[cls]


def _random_continue(loop: ast.For) -> bool:
    """Some `continue` of the loop sits under an `if` that tests a random draw (a call, or a
    name the loop assigned from one), inside a test of `self.training`."""
    return _under(loop.body, _drawn(loop), random=False, training=False)


def _random_call(loop: ast.For) -> bool:
    """The loop's layer is called under an `if` that tests a random draw and
    `self.training`: wav2vec 2.0's `if not self.training or dropout_probability >
    self.layerdrop: x = layer(x)`, or transformers' `skip_the_layer = self.training and
    dropout_probability < p` before `if not skip_the_layer:`."""
    layers = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
    drawn = _drawn(loop)
    gated = {
        t.id
        for n in ast.walk(loop)
        if isinstance(n, ast.Assign) and _random_in_training(n.value, drawn, set())
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    return any(
        isinstance(n, ast.If)
        and _random_in_training(n.test, drawn, gated)
        and any(
            isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id in layers
            for stmt in n.body
            for c in ast.walk(stmt)
        )
        for n in ast.walk(loop)
    )


def _random_in_training(expr: ast.AST, drawn: set[str], gated: set[str]) -> bool:
    """`expr` tests a random draw and `self.training`, or reads a name assigned so."""
    if _reads(expr, gated):
        return True
    training = any(isinstance(n, ast.Attribute) and n.attr == "training" for n in ast.walk(expr))
    return training and (_draws(expr) or _reads(expr, drawn))


def _drawn(node: ast.AST) -> set[str]:
    """Names assigned from a random draw below `node`."""
    return {
        t.id
        for n in ast.walk(node)
        if isinstance(n, ast.Assign) and _draws(n.value)
        for t in n.targets
        if isinstance(t, ast.Name)
    }


def _under(
    body: list[ast.stmt],
    drawn: set[str],
    *,
    random: bool,
    training: bool,
    stop: type[ast.stmt] = ast.Continue,
) -> bool:
    for stmt in body:
        if isinstance(stmt, stop) and random and training:
            return True
        if isinstance(stmt, ast.If):
            r = random or _draws(stmt.test) or _reads(stmt.test, drawn)
            tr = training or any(
                isinstance(n, ast.Attribute) and n.attr == "training" for n in ast.walk(stmt.test)
            )
            if _under(stmt.body, drawn, random=r, training=tr, stop=stop):
                return True
    return False


def _draws(expr: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and _called(n) in RANDOM_CALLS for n in ast.walk(expr))


def _reads(expr: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(expr))


def _called(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
