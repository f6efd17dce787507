"""The rule catalogue (gradscope/catalogue.py): every module that declares a rule is listed
once, under the stage it declares for; nothing loads a rule until a registry is read, and
the first read, whichever it is, loads every rule."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from gradscope import catalogue
from gradscope.catalogue import Declared
from gradscope.rules import registry
from gradscope.rules.registry import Stage

PACKAGE = Path(catalogue.__file__).resolve().parent


def _declares_a_rule(source: str) -> bool:
    """Whether a function in the source is decorated with `@rule(...)` (a mention in a
    docstring or a comment is not a declaration)."""
    return any(
        isinstance(d, ast.Call) and getattr(d.func, "id", getattr(d.func, "attr", "")) == "rule"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        for d in node.decorator_list
    )


def _declaring_modules() -> set[str]:
    found = set()
    for path in PACKAGE.rglob("*.py"):
        if _declares_a_rule(path.read_text()):
            parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
            found.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def test_the_catalogue_lists_every_module_that_declares_a_rule():
    """A new rule module not catalogued fails here: its rules would be missing from
    RULES, the docs and the judge wherever nothing else imported it."""
    listed = catalogue.modules()
    assert len(listed) == len(set(listed)), "a module is listed twice"
    declaring = _declaring_modules()
    assert sorted(declaring - set(listed)) == [], "add these to gradscope/catalogue.py"
    assert sorted(set(listed) - declaring) == [], "these declare no rule: drop them"


def test_the_declaration_finder_tells_a_declaration_from_a_mention():
    assert _declares_a_rule("@rule('GS1', 's')\ndef check(stats, t):\n    pass\n")
    assert _declares_a_rule("@registry.rule('GS1')\ndef check(stats, t):\n    pass\n")
    assert not _declares_a_rule('"""Declare it with `@rule(...)`."""\n# @rule(\n')
    assert not _declares_a_rule("@other('GS1')\ndef check(stats, t):\n    pass\n")


def test_each_module_is_catalogued_under_the_stage_it_declares_for():
    assert set(catalogue.CATALOGUE) == {stage.value for stage in Stage}
    for stage in Stage:
        modules = {check.__module__ for check in registry.in_declared_order(stage).values()}
        assert modules <= set(catalogue.CATALOGUE[stage.value]), stage


def test_the_per_run_checks_run_in_the_catalogues_order():
    """The order of a report's findings: experts, grads, magnitude, zeros, memory, logits,
    whichever module imported which first (grads imports experts)."""
    assert list(registry.in_declared_order(Stage.RUN)) == [
        "GS109",
        "GS101",
        "GS102",
        "GS103",
        "GS104",
        "GS105",
        "GS106",
        "GS108",
        "GS107",
        "GS301",
        "GS432",
    ]


def test_the_catalogue_not_the_import_order_decides_the_run_order(monkeypatch):
    run = catalogue.CATALOGUE["run"]
    monkeypatch.setitem(catalogue.CATALOGUE, "run", tuple(reversed(run)))
    order = list(registry.in_declared_order(Stage.RUN))
    assert order[:2] == ["GS432", "GS301"]
    assert order[-1] == "GS109"
    assert order.index("GS101") < order.index("GS102") < order.index("GS103")


def test_a_declared_registry_loads_on_its_first_read_and_not_on_a_declaration(monkeypatch):
    loads = []
    monkeypatch.setattr(catalogue, "load", lambda: loads.append(1))
    reg: Declared[str, int] = Declared()
    reg["GS1"] = 1
    assert reg.holds("GS1") and not reg.holds("GS2") and loads == []
    assert reg["GS1"] == 1 and reg.get("GS2") is None and "GS1" in reg
    assert list(reg) == ["GS1"] and len(reg) == 1 and dict(reg.items()) == {"GS1": 1}
    assert len(loads) >= 6


def _fresh(code: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


LOADED = (
    "import sys\n"
    "def loaded(*prefixes):\n"
    "    return sorted(m for m in sys.modules if m.split('.')[0] == 'torch' or any(\n"
    "        m == p or m.startswith(p + '.') for p in prefixes))\n"
)


@pytest.mark.slow
@pytest.mark.parametrize(
    "module", ["gradscope.errors", "gradscope", "gradscope.findings", "gradscope.config"]
)
def test_importing_a_bottom_module_loads_no_rule_and_no_torch(module):
    """`import gradscope.errors` loaded 83 of gradscope's modules (every rule family, the
    gradcheck checker among them) while every family was imported by the package."""
    code = LOADED + (
        f"import {module}\n"
        "print(loaded('gradscope.rules', 'gradscope.gradcheck', 'gradscope.diff',\n"
        "             'gradscope.distributed', 'gradscope.gate', 'gradscope.steps'))"
    )
    assert _fresh(code) == "[]"


@pytest.mark.slow
@pytest.mark.parametrize(
    "first_read",
    [
        "len(findings.RULES)",
        "findings.lookup('weights-nan')",
        "'GS201' in findings.RULES",
        "registry.DOCS.get('GS605')",
        "registry.declared(registry.Stage.WATCH)",
        "import gradscope.rules.step_vlag; list(findings.RULES)",  # one module first
        "import gradscope.rule_docs; gradscope.rule_docs.markdown()",
    ],
)
def test_the_first_read_of_any_registry_loads_every_rule(first_read):
    code = LOADED + (
        "from gradscope import catalogue, findings\n"
        "from gradscope.rules import registry\n"
        "before = loaded(*catalogue.modules())\n"
        f"{first_read}\n"
        "missing = sorted(set(catalogue.modules()) - set(sys.modules))\n"
        "print(before, missing, len(findings.RULES) == len(registry.DOCS), 'torch' in sys.modules)"
    )
    assert _fresh(code) == "[] [] True False"


@pytest.mark.slow
def test_threads_reading_first_all_see_every_rule():
    """A thread that reads while another loads waits for the whole catalogue."""
    code = (
        "import threading\n"
        "from gradscope import findings\n"
        "seen = []\n"
        "go = threading.Barrier(4)\n"
        "def read():\n"
        "    go.wait()\n"
        "    seen.append(len(list(findings.RULES.values())))\n"
        "threads = [threading.Thread(target=read) for _ in range(4)]\n"
        "[t.start() for t in threads]; [t.join() for t in threads]\n"
        "print(len(set(seen)), seen[0] == len(findings.RULES) > 60)"
    )
    assert _fresh(code) == "1 True"


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["--help"], ["watch", "--help"], ["gradcheck", "--help"]])
def test_help_reads_no_registry(argv):
    """`gradscope --help` loads no torch and never reads RULES: the modules only the
    catalogue loads stay unloaded, and so do the watch judge and the gradcheck checker
    (the API imports them in the functions that run them, the views read the watcher's
    report without its session)."""
    code = LOADED + (
        f"sys.argv = ['gradscope', *{argv!r}]\n"
        "from gradscope.cli import app\n"
        "try:\n    app()\nexcept SystemExit:\n    pass\n"
        "print(loaded('gradscope.rules.experts', 'gradscope.rules.grads',\n"
        "             'gradscope.rules.steps', 'gradscope.rules.step_vlag',\n"
        "             'gradscope.distributed.findings', 'gradscope.rules.watch',\n"
        "             'gradscope.gradcheck.checker', 'gradscope.gradcheck.findings',\n"
        "             'gradscope.watcher.session'))"
    )
    assert _fresh(code).splitlines()[-1] == "[]"
