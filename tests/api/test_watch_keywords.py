"""`api.watch(**given)` and `api.watch_script(**given)` are typed over WatchOptions' fields
(api/watch_keywords.py): the two stay in step, and mypy rejects a misspelt keyword."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import pytest

from gradscope import api
from gradscope.api.watch_keywords import WatchKeywords

ROOT = Path(__file__).resolve().parent.parent.parent


def test_the_keywords_are_the_options_fields_but_the_scripts_arguments():
    fields = {f.name: f.type for f in dataclasses.fields(api.WatchOptions)}
    hints = typing.get_type_hints(WatchKeywords)
    assert set(hints) == set(fields) - {"argv"}
    options = typing.get_type_hints(api.WatchOptions)
    assert {k: hints[k] for k in hints} == {k: options[k] for k in hints}


SNIPPET = """
from gradscope import api

api.watch_script("train.py", steps=3, log="steps.jsonl")
api.watch(update_every=5, label="block")
api.watch_script("train.py", stepz=3)
api.watch(steps="3")
"""


@pytest.mark.slow
def test_mypy_rejects_a_misspelt_or_mistyped_keyword(tmp_path, monkeypatch):
    """mypy reads the snippet and the API's watch functions only (every other import is
    Any: --follow-imports=skip), which keeps it to seconds."""
    mypy = pytest.importorskip("mypy.api")
    monkeypatch.chdir(ROOT)  # the files' modules are named from here
    snippet = tmp_path / "snippet.py"
    snippet.write_text(SNIPPET)
    api_dir = ROOT / "gradscope" / "api"
    out, _, status = mypy.run(
        [
            "--python-version",
            "3.10",
            "--follow-imports=skip",
            "--no-incremental",
            "--explicit-package-bases",
            str(snippet),
            *(str(api_dir / name) for name in ("__init__.py", "watching.py", "watch_keywords.py")),
        ]
    )
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert status == 1
    assert [line.split(":")[1] for line in errors] == ["6", "7"], out
    assert '"stepz"' in errors[0] and '"steps"' in errors[1]
