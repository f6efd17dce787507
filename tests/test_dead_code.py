"""`make lint`'s dead-code check: vulture with [tool.vulture] of pyproject.toml finds
nothing in the package, and would find a function nothing calls (a test's use does not
count: the package is scanned alone), but not a `@rule` check or a name the whitelist
says is used by name."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


def test_lint_runs_the_dead_code_check_that_setup_installs():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert any(
        re.fullmatch(r"vulture==[\d.]+", d)
        for d in project["project"]["optional-dependencies"]["dev"]
    )
    lint = (ROOT / "Makefile").read_text().split("\nlint:")[1].split("\n\n")[0]
    assert "$(BIN)/vulture" in lint
    assert "make lint" in (ROOT / ".ci" / "run").read_text()
    assert project["tool"]["vulture"]["min_confidence"] <= 60  # an unused function's


def _unused(*extra: Path) -> list[str]:
    vulture = pytest.importorskip("vulture", reason="`make setup` installs it (dev extras)")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["vulture"]
    found = vulture.Vulture(
        ignore_names=config["ignore_names"], ignore_decorators=config["ignore_decorators"]
    )
    found.scavenge([str(ROOT / p) for p in config["paths"]] + [str(p) for p in extra])
    return [
        f"{Path(item.filename).name}:{item.name}"
        for item in found.get_unused_code(min_confidence=config["min_confidence"])
    ]


def test_the_package_has_no_dead_code():
    assert _unused() == []


def test_the_check_finds_what_nothing_calls_but_not_a_rule_or_a_protocol(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text(
        "from gradscope.rules.registry import rule\n"
        "LEFTOVER = 'used-twice'\n"
        "class Plan:\n"
        "    def formats(self):\n"
        "        return set()\n"
        "def forgotten():\n"
        "    return 1\n"
        "@rule('GS999', 'planted', None, 'none-grad', None, 'x', example='', fix='')\n"
        "def planted_check(stats, t):\n"
        "    '''Declared: its stage calls it.'''\n"
        "def __getattr__(name):\n"
        "    return name\n"
        "Plan()\n"
    )
    assert sorted(_unused(planted)) == [
        "planted.py:LEFTOVER",
        "planted.py:forgotten",
        "planted.py:formats",
    ]
