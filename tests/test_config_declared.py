"""The thresholds are declared with their rules (`@rule(thresholds=(Threshold(...),))`);
config.Thresholds, configs/default.toml and docs/config.md's table follow them."""

from __future__ import annotations

import os
import pickle

import pytest
import tomllib

from gradscope import rule_docs
from gradscope.findings import THRESHOLDS, Severity, Threshold
from gradscope.rules.registry import DOCS, Stage, rule
from gradscope.thresholds import Thresholds, threshold_value

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOP_LEVEL = {"baseline-factor"}
"""Keys a rule names that are top-level settings, not `[thresholds]`."""


def _read(*path: str) -> str:
    return open(os.path.join(ROOT, *path), encoding="utf-8").read()


def readers(key: str) -> str:
    return ", ".join(sorted(r for r, d in DOCS.items() if key in d.thresholds))


def test_default_toml_says_what_the_declarations_say():
    table = tomllib.loads(_read("configs", "default.toml"))["thresholds"]
    assert table == {k: t.default for k, t in THRESHOLDS.items()}


def test_docs_config_table_is_the_declarations():
    page = _read("docs", "config.md")
    table = rule_docs.threshold_table()
    assert (
        rule_docs.splice(page, table, rule_docs.THRESHOLDS_BEGIN, rule_docs.THRESHOLDS_END) == page
    ), "docs/config.md's thresholds differ from the declarations: run `make docs`"
    for key, t in THRESHOLDS.items():
        assert f"| `{key}` | `{rule_docs.spelled(t.default)}` | {readers(key)} | {t.doc} |" in table


def test_defaults_are_spelled_as_in_default_toml():
    spelled = [rule_docs.spelled(v) for v in (1e3, 1.0, 1e-7, 1e2, 1e-3, 0.05, 128, 6.0, 10)]
    assert spelled == ["1e3", "1.0", "1e-7", "1e2", "1e-3", "0.05", "128", "6.0", "10"]


def test_every_threshold_a_rule_names_is_declared_and_read():
    named = {k for d in DOCS.values() for k in d.thresholds}
    assert named - set(THRESHOLDS) == TOP_LEVEL
    assert set(THRESHOLDS) - named == set()


def test_thresholds_read_the_declared_defaults():
    t = Thresholds()
    assert t.values() == {k: d.default for k, d in THRESHOLDS.items()}
    assert t.explode_norm == THRESHOLDS["explode-norm"].default
    changed = t.with_values(spike_sigma=3, **{"warmup-steps": 0})
    assert (changed.spike_sigma, changed.warmup_steps, t.spike_sigma) == (3, 0, 6.0)
    assert changed == Thresholds(spike_sigma=3, warmup_steps=0) != t
    assert pickle.loads(pickle.dumps(changed)) == changed


def test_thresholds_refuse_what_no_rule_declared():
    with pytest.raises(TypeError, match="explode_nrom"):
        Thresholds(explode_nrom=1)
    with pytest.raises(AttributeError, match="explode-nrom"):
        Thresholds().explode_nrom  # noqa: B018
    with pytest.raises(AttributeError, match="immutable"):
        Thresholds().explode_norm = 1  # type: ignore[misc]


@pytest.mark.parametrize("key", [k for k, t in THRESHOLDS.items() if t.above_zero])
def test_above_zero_is_the_declarations(key):
    with pytest.raises(ValueError, match="above 0"):
        threshold_value(0, key)
    assert threshold_value(0, "warmup-steps") == 0.0


def test_a_threshold_is_declared_once():
    twice = Threshold("spike-sigma", 1.0, "again")
    with pytest.raises(ValueError, match="spike-sigma is declared twice"):
        rule(
            "GS499",
            "twice",
            Severity.INFO,
            "spike",
            Stage.WATCH,
            "x",
            example="x",
            fix="x",
            thresholds=(twice,),
        )
