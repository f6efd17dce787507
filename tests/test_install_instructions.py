"""Every install instruction gets this project: the name `gradscope` on the public
package index belongs to an unrelated project, so no instruction may install it by name."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
TAKEN = "gradscope"

# `pip install [options] gradscope[extras][==version]`, and the same through uv or
# pipx; a path (./gradscope, /x/gradscope) or another name (torch-gradscope) is fine
_INSTALL = re.compile(r"\b(?:pip3?|uv pip|pipx|python -m pip)\s+install\b(?P<args>[^\n#`]*)")
_REQUIREMENT = re.compile(r"^[\"']?gradscope(?:\[[^\]]*\])?(?:[=<>~!]=?[^\s\"']*)?[\"']?$")


def instructions() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "Makefile"]
    files += sorted((ROOT / "docs").rglob("*.md"))
    files += sorted(p for p in (ROOT / "configs").iterdir() if p.is_file())
    return [p for p in files if p.exists()]


def takes_the_taken_name(line: str) -> bool:
    for match in _INSTALL.finditer(line):
        if any(_REQUIREMENT.match(arg) for arg in match.group("args").split()):
            return True
    return False


@pytest.mark.parametrize(
    "line, bad",
    [
        ("pip install gradscope", True),
        ("  pip install -U 'gradscope[test]'  # latest", True),
        ("python -m pip install gradscope==0.1.0", True),
        ("uv pip install --system gradscope", True),
        ("pip install /path/to/gradscope", False),
        ("pip install ./.gradscope-src", False),
        ("pip install torch-gradscope", False),
        ("pip install -e path/to/gradscope", False),
        ("the command stays gradscope; pip install torch==2.13.0", False),
    ],
)
def test_the_check_tells_the_taken_name_from_a_path(line, bad):
    assert takes_the_taken_name(line) is bad


def test_no_instruction_installs_the_unrelated_project_by_name():
    offending = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in instructions()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if takes_the_taken_name(line)
    ]
    assert offending == []


def test_the_distribution_name_is_not_the_taken_one():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] != TAKEN
    assert project["scripts"]["gradscope"] == "gradscope.cli:main"  # the command stays


def test_the_workflow_installs_gradscope_from_its_repository():
    workflow = (ROOT / "configs" / "github-actions.yml").read_text()
    assert "path: .gradscope-src" in workflow
    assert "pip install ./.gradscope-src" in workflow


def _minutes(text: str) -> tuple[str, str]:
    """The set-up time a text announces: "1-2 min ..., up to 6" → ("1-2", "6")."""
    found = re.search(r"(\d+-\d+) min[^\n]*?up to (\d+)", text)
    assert found, "no set-up time announced"
    return found[1], found[2]


def test_the_readme_and_the_makefile_announce_the_same_set_up_time():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    demo = next(line for line in readme.splitlines() if line.startswith("make demo"))
    assert _minutes(demo) == _minutes(makefile)
    assert "about 1 min" not in readme


def test_set_up_says_what_it_does_and_lets_pip_show_its_progress():
    recipe = (ROOT / "Makefile").read_text(encoding="utf-8").split("$(VENV)/.installed:")[1]
    recipe = recipe.split("\n\n")[0]
    installs = [line for line in recipe.splitlines() if "pip install" in line]
    assert len(installs) == 2 and not any(" -q" in line for line in installs)
    lines = recipe.splitlines()
    for i, line in enumerate(lines):
        if "pip install" in line or " -m venv " in line:
            assert "@echo" in lines[i - 1], f"no line before: {line.strip()}"
