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
    "fmt": set(),
    "stdio": set(),
    "findings": set(),
    "stats": set(),
    "config": {"errors", "findings"},
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


def test_the_families_have_their_folders():
    """The inspect family and the CI gate are folders, as watcher/, gradcheck/, diff/ are."""
    top = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "__main__"}
    for module in ("probe", "preserve", "hooks", "explain", "script", "targets", "check"):
        assert module not in top
    assert (PACKAGE / "inspector" / "probe.py").exists()
    assert (PACKAGE / "gate" / "check.py").exists()
