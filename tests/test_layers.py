"""The package's layers: what a module may import, read from its source (lazy imports in
functions included). The data a rule needs sits below the rules, the rules below the
commands that run them, and no two parts of the package import each other."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "gradscope"

BOTTOM = {
    # module: the gradscope modules it may import
    "errors": set(),
    "autograd_walk": set(),
    "safe_json": set(),
    "catalogue": set(),
    "fmt": set(),
    "stdio": set(),
    "troubleshooting": set(),
    "findings": {"catalogue", "troubleshooting"},
    "stats": set(),
    "thresholds": {"findings"},
    "config": {"errors", "findings", "thresholds"},
    "outcome": {"errors", "findings"},
}


def _unit(module: str) -> str:
    """`gradscope.watcher.report` → `watcher`; `gradscope.config` → `config`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "gradscope":
                found |= {f"gradscope.{a.name}" for a in node.names}
            elif node.module.startswith("gradscope."):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("gradscope.")}
    return found


def _graph() -> dict[str, dict[str, set[str]]]:
    """unit → unit it imports → the files that do."""
    graph: dict[str, dict[str, set[str]]] = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        source = _unit(".".join(rel.parts))
        for module in _imports(path):
            target = _unit(module)
            if target not in (source, "gradscope", "__init__"):
                graph.setdefault(source, {}).setdefault(target, set()).add(str(rel))
    return graph


def test_the_bottom_modules_import_only_what_lies_below_them():
    graph = _graph()
    wrong = {
        module: sorted(set(graph.get(module, {})) - allowed)
        for module, allowed in BOTTOM.items()
        if set(graph.get(module, {})) - allowed
    }
    assert wrong == {}


def test_no_two_parts_of_the_package_import_each_other():
    graph = _graph()
    cycles = [
        (a, b, sorted(graph[a][b]), sorted(graph[b][a]))
        for a, b in itertools.combinations(sorted(graph), 2)
        if b in graph[a] and a in graph.get(b, {})
    ]
    assert cycles == []


def _module(path: Path) -> str:
    """`gradscope/steps/records.py` → `gradscope.steps.records`; a package is its folder."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_imports(source: str, me: str, modules: set[str]) -> set[str]:
    """The package's modules this file imports, at its top or inside a function (where an
    import hides a cycle until the function runs): `from gradscope.steps import records`
    is the module records, `from gradscope.steps.records import WatchRun` too."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                inner = f"{node.module}.{alias.name}"
                found.add(inner if inner in modules else node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found & modules - {me}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, rest = work[-1]
            step = next(rest, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def test_no_module_imports_itself_through_others():
    """Inside a folder too: records.py importing step_store.py inside a method while
    step_store.py imports records.py at its top is a cycle."""
    paths = {_module(p): p for p in PACKAGE.rglob("*.py")}
    graph = {
        name: _module_imports(path.read_text(), name, set(paths)) for name, path in paths.items()
    }
    assert _cycles(graph) == []


def test_the_cycle_finder_sees_a_cycle_hidden_in_a_function():
    """`_cycles` on what `_module_imports` reads, with one of the imports in a function."""
    files = {
        "gradscope.a": "from gradscope.b import thing\n",
        "gradscope.b": "def f():\n    from gradscope import a\n",
        "gradscope.c": "import gradscope.a\n",
    }
    graph = {name: _module_imports(text, name, set(files)) for name, text in files.items()}
    assert graph["gradscope.b"] == {"gradscope.a"}
    assert _cycles(graph) == [["gradscope.a", "gradscope.b"]]


def test_no_module_imports_another_modules_private_names():
    """`from gradscope.inspector.probe import _backward`: a private name is its module's
    own; another module that needs it needs a public one."""
    private = [
        f"{path.relative_to(PACKAGE.parent)}: {node.module}.{alias.name}"
        for path in PACKAGE.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gradscope")
        for alias in node.names
        if alias.name.startswith("_") and not alias.name.startswith("__")
    ]
    assert private == []


def test_the_families_have_their_folders():
    """The inspect family and the CI gate are folders, as watcher/, gradcheck/, diff/ are."""
    top = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "__main__"}
    for module in ("probe", "preserve", "hooks", "explain", "script", "targets", "check"):
        assert module not in top
    assert (PACKAGE / "inspector" / "probe.py").exists()
    assert (PACKAGE / "gate" / "check.py").exists()


MOST_LINES = 400
MOST_FUNCTION_LINES = 50

LONGER = {
    # module or module:function: why it may be longer, for now (the list only shrinks)
    "examples/functions.py": "example data: the built-in gradcheck targets, one Function each, "
    "addressed as gradscope.examples.functions:NAME in the docs and by users",
}


def _too_long() -> set[str]:
    too_long = set()
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        source = path.read_text()
        if len(source.splitlines()) > MOST_LINES:
            too_long.add(rel)
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if node.end_lineno - node.lineno + 1 > MOST_FUNCTION_LINES:  # type: ignore[operator]
                    too_long.add(f"{rel}:{node.name}")
    return too_long


def test_no_module_over_400_lines_and_no_function_over_50():
    """Small modules with one job, functions that fit on a screen (docstrings count); the
    few exceptions are named, with their reason, in LONGER."""
    assert sorted(_too_long() - set(LONGER)) == [], "split these"


def test_the_exceptions_to_the_caps_are_still_needed():
    """An exception that fits the caps now leaves LONGER, so the list only shrinks."""
    assert sorted(set(LONGER) - _too_long()) == [], "remove these from LONGER"


HEAVY = {
    "torch",
    "matplotlib",
    "graphviz",
    "torchviz",
    "tensorboard",
    "transformers",
    "numpy",
    "wandb",
    "mlflow",
    "PIL",
}
"""What `gradscope --help` must not load: the reason an import may stay in a function."""
NOT_FOR_HELP = {
    "gradscope.rules.watch",
    "gradscope.gradcheck.checker",
    "gradscope.gradcheck.findings",
}
"""gradscope's own modules `--help` must not load either (the watch judge, the gradcheck
checker and its rules: tests/rules/test_catalogue.py's help test): a reason too."""


def _resolved(node: ast.Import | ast.ImportFrom, modules: set[str]) -> list[str]:
    """The modules an import statement loads (a package's module for `from pkg import mod`)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.module is None or node.level:
        return []
    return [
        f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in modules else node.module
        for alias in node.names
    ]


def _placed_imports(source: str, modules: set[str]) -> tuple[set[str], list[tuple[str, int]]]:
    """(what the module loads when imported, [(module, line)] imported inside functions);
    imports under TYPE_CHECKING load nothing, one in a function's `try` probes an optional
    package, and a module's `__getattr__` (PEP 562) is how a package defers its re-exports,
    so none of them counts."""
    tree = ast.parse(source)
    skipped, in_functions, top = set(), [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(n) for n in ast.walk(node)}
    for function in ast.walk(tree):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            tries = {
                id(n)
                for t in ast.walk(function)
                if isinstance(t, ast.Try) or function.name == "__getattr__"
                for n in ast.walk(t)
            }
            for node in ast.walk(function):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    skipped.add(id(node))
                    if id(node) not in tries:
                        in_functions += [(m, node.lineno) for m in _resolved(node, modules)]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in skipped:
            top |= set(_resolved(node, modules))
    return top, in_functions


def test_imports_are_at_the_top_unless_they_keep_help_from_loading_torch():
    """An import inside a function is one of a heavy package (torch, matplotlib...) or of a
    gradscope module that loads one (or one of NOT_FOR_HELP), made by a module that does not
    load it itself, with the reason said once in a comment ("... in functions ..."); any other
    import goes at the top, where the file's head shows what it depends on."""
    paths = {_module(p): p for p in PACKAGE.rglob("*.py")}
    placed = {name: _placed_imports(path.read_text(), set(paths)) for name, path in paths.items()}

    memo: dict[str, set[str]] = {}

    def loads(name: str) -> set[str]:
        """The modules importing `name` loads: its own top imports and its packages'."""
        if name not in placed:
            return {name}
        if name not in memo:
            memo[name] = {name}  # while in progress: a cycle is test_no_module_imports_itself...
            parents = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
            for other in placed[name][0] | parents:
                memo[name] |= loads(other)
        return memo[name]

    def heavy(name: str) -> bool:
        return any(m.split(".")[0] in HEAVY for m in loads(name))

    def kept_from_help(name: str) -> bool:
        return heavy(name) or bool(loads(name) & NOT_FOR_HELP)

    needless, unexplained = [], []
    for name, (_, in_functions) in placed.items():
        for target, line in in_functions:
            if heavy(name) or not kept_from_help(target):
                needless.append(f"{paths[name].relative_to(PACKAGE.parent)}:{line} {target}")
        source = paths[name].read_text()
        if in_functions and not any(
            "in functions" in line for line in source.splitlines() if line.strip().startswith("#")
        ):
            unexplained.append(str(paths[name].relative_to(PACKAGE.parent)))
    assert needless == [], "move these imports to the top of their files"
    assert unexplained == [], "say once, in a comment, why these imports stay in functions"
