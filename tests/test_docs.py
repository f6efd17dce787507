"""The documentation says what the code does: the rule reference is generated from the
registry, every rule's example makes it fire, the README is a first page that links to
every reference page, and the package layout names every module."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from gradscope import rule_docs
from gradscope.config import Settings
from gradscope.findings import RULES

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
REGENERATE = "docs/rules.md differs from the rule registry: run `make docs`"


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def test_the_rules_page_is_the_registry():
    page = read(DOCS / "rules.md")
    assert rule_docs.splice(page, rule_docs.markdown()) == page, REGENERATE


def test_the_generated_block_is_found_and_replaced():
    page = f"intro\n{rule_docs.BEGIN}\nold table\n{rule_docs.END}\nafter\n"
    assert (
        rule_docs.splice(page, "new\n")
        == f"intro\n{rule_docs.BEGIN}\nnew\n{rule_docs.END}\nafter\n"
    )
    with pytest.raises(ValueError, match="no generated block"):
        rule_docs.splice("no markers here", "new\n")


def test_every_rule_has_its_docs():
    assert set(rule_docs.DOCS) == set(RULES), (
        "each rule needs its @rule declaration (gradscope/rules/registry.py)"
    )
    assert {r.source for r in RULES.values()} <= set(rule_docs.STAGES)


def test_the_thresholds_named_are_settings_and_the_why_says_how_they_are_used():
    keys = set(Settings().threshold_dict()) | {"baseline-factor"}
    for rule, doc in rule_docs.DOCS.items():
        assert set(doc.thresholds) <= keys, rule
        for key in doc.thresholds:
            assert key in doc.why, (rule, key)


def commands(program: str) -> list[tuple[str, list[str]]]:
    return [
        (rule, shlex.split(doc.command)[1:])
        for rule, doc in rule_docs.DOCS.items()
        if doc.command.startswith(f"gradscope {program} ")
    ]


@pytest.mark.parametrize(("rule", "argv"), commands("inspect"))
def test_each_inspect_example_makes_its_rule_fire(rule, argv):
    import gradscope

    (target,) = argv[1:]
    report = gradscope.inspect_target(target)
    assert rule in {f.rule for f in report.findings}


@pytest.mark.parametrize(("rule", "argv"), commands("gradcheck"))
def test_each_gradcheck_example_makes_its_rule_fire(rule, argv):
    from gradscope.gradcheck import options_for, run
    from gradscope.gradcheck.findings import findings

    (spec,) = argv[1:]
    assert rule in {f.rule for f in findings(run([(spec, options_for())]))}


def test_every_example_command_names_something_that_exists():
    from gradscope.examples import EXAMPLES

    for rule, doc in rule_docs.DOCS.items():
        if not doc.command:
            continue
        argv = shlex.split(doc.command)
        assert argv[0] == "gradscope", rule
        if argv[1] == "inspect":
            assert argv[2] in EXAMPLES, rule
        for word in argv[2:]:
            path = word.partition(":")[0]
            if path.endswith(".py"):
                assert (ROOT / path).is_file(), (rule, path)


@pytest.mark.slow
def test_the_watch_example_makes_its_rules_fire():
    import gradscope

    script = str(ROOT / "gradscope" / "examples" / "train_buggy.py")
    found = {f.rule for f in gradscope.watch_script(script, []).findings}
    expected = {
        rule for rule, doc in rule_docs.DOCS.items() if "examples/train_buggy.py" in doc.command
    }
    assert expected and expected <= found


# --- the README is a first page ----------------------------------------------------------------


def links(path: Path) -> list[str]:
    return re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", read(path))


def test_the_readme_is_a_first_page():
    lines = read(ROOT / "README.md").splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines: move reference to docs/"


def test_the_readme_links_every_docs_page():
    linked = {Path(link).name for link in links(ROOT / "README.md") if link.startswith("docs/")}
    pages = {p.name for p in DOCS.glob("*.md")}
    assert pages - linked == set()


@pytest.mark.parametrize("page", ["README.md", *(f"docs/{p.name}" for p in DOCS.glob("*.md"))])
def test_relative_links_lead_somewhere(page):
    path = ROOT / page
    broken = [
        link for link in links(path) if "://" not in link and not (path.parent / link).exists()
    ]
    assert broken == []


def test_the_layout_names_every_module_of_the_package():
    layout = read(DOCS / "layout.md")
    package = ROOT / "gradscope"
    names = [
        p.name + ("/" if p.is_dir() else "")
        for p in package.iterdir()
        if (p.suffix == ".py" and p.name != "__init__.py")
        or (p.is_dir() and (p / "__init__.py").exists())
    ]
    missing = [n for n in names if not re.search(rf"^\s+{re.escape(n)}\s", layout, re.M)]
    assert missing == []


@pytest.mark.slow
def test_the_collapsed_gpt_has_as_many_nodes_as_docs_graph_says(tmp_path):
    from typer.testing import CliRunner

    from gradscope.cli import app

    said = re.search(r"collapsed it to\s+(\d+)", read(DOCS / "graph.md"))
    assert said is not None
    out = tmp_path / "gpt.dot"
    result = CliRunner().invoke(app, ["graph", "deep-transformer", "-o", str(out)])
    assert result.exit_code == 0, result.output
    nodes = re.findall(r"^\s+(\w+) \[label=", out.read_text(), re.M)
    assert len([n for n in nodes if n != "legend"]) == int(said.group(1))
