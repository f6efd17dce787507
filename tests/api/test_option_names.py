"""Each command's options class is the only class of its name in the package: the API's
GraphOptions and the drawing's options (graph.DrawOptions) were once both GraphOptions."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from gradscope import api

PACKAGE = Path(api.__file__).resolve().parent.parent


def test_no_two_classes_share_an_options_class_name():
    defined = Counter(
        node.name
        for path in PACKAGE.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef)
    )
    options = [name for name in api.__all__ if name.endswith("Options")]
    assert "GraphOptions" in options and len(options) >= 5
    assert {name: defined[name] for name in options if defined[name] != 1} == {}
