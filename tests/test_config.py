"""Settings: defaults < pyproject.toml < --config < flags; bad files fail with file, key, line."""

from __future__ import annotations

import os
import textwrap

import pytest

from gradscope import config
from gradscope.config import Settings, Thresholds, load
from gradscope.errors import ConfigError
from gradscope.findings import Severity

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write(path, text):
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_configs_default_toml_matches_built_in_defaults(tmp_path):
    settings = config.load(os.path.join(ROOT, "configs", "default.toml"), cwd=str(tmp_path))
    assert settings.thresholds == Thresholds()
    assert settings.fail_on is Severity.ERROR


def test_precedence_pyproject_or_config_then_flags(tmp_path):
    write(
        tmp_path / "pyproject.toml",
        """
        [tool.gradscope]
        fail-on = "warning"
        [tool.gradscope.thresholds]
        explode-norm = 10
        vanish-norm = 1e-5
        """,
    )
    sub = tmp_path / "src" / "deep"
    sub.mkdir(parents=True)
    s = config.load(cwd=str(sub))  # found from a folder below
    assert s.thresholds.explode_norm == 10 and s.thresholds.vanish_norm == 1e-5
    assert s.fail_on is Severity.WARNING
    assert s.sources["explode-norm"].endswith("pyproject.toml")
    cfg = write(
        tmp_path / "ci.toml",
        """
        [thresholds]
        explode-norm = 20
        """,
    )
    s = config.load(cfg, cwd=str(sub))  # --config replaces pyproject.toml, as pytest -c does
    assert s.thresholds.explode_norm == 20 and s.thresholds.vanish_norm == Thresholds().vanish_norm
    assert s.fail_on is Severity.ERROR
    assert s.sources["explode-norm"] == cfg
    s = config.load(
        cfg, cwd=str(sub), flags={"explode-norm": 30.0, "fail-on": "never", "vanish-norm": None}
    )
    assert s.thresholds.explode_norm == 30 and s.fail_on is None
    assert config.load(cwd=str(sub), flags={"vanish-norm": 1.0}).thresholds.explode_norm == 10
    assert s.sources["explode-norm"] == "command line"


def test_pyproject_without_table_is_skipped(tmp_path):
    write(tmp_path / "pyproject.toml", "[tool.gradscope]\nfail-on = 'info'\n")
    inner = tmp_path / "pkg"
    inner.mkdir()
    write(inner / "pyproject.toml", "[project]\nname = 'x'\n")
    assert config.load(cwd=str(inner)).fail_on is Severity.INFO


def test_every_key(tmp_path):
    cfg = write(
        tmp_path / "all.toml",
        """
        fail-on = "info"
        ignore = ["none-grad:pooler.*"]
        [thresholds]
        explode-norm = 1
        explode-median-ratio = 2
        explode-min-norm = 3
        vanish-norm = 4
        vanish-depth-ratio = 5
        [severity]
        frozen = "warning"
        GS105 = "error"
        [[inspect]]
        target = "models/net.py:build"
        ignore = ["GS101:aux.*"]
        [[gradcheck]]
        target = "mypkg.ops:MyFn"
        shape = { x = [3, 4] }
        args = { dim = -1 }
        """,
    )
    s = config.load(cfg, cwd=str(tmp_path))
    assert s.thresholds == Thresholds(
        explode_norm=1,
        explode_median_ratio=2,
        explode_min_norm=3,
        vanish_norm=4,
        vanish_depth_ratio=5,
    )
    assert s.severities == {"frozen": Severity.WARNING, "GS105": Severity.ERROR}
    assert s.ignores == (("none-grad", "pooler.*"),)
    assert s.inspect[0].target == "models/net.py:build"
    assert s.inspect[0].options == {"ignore": ["GS101:aux.*"]}
    assert s.gradcheck[0].options == {"shape": {"x": [3, 4]}, "args": {"dim": -1}}


@pytest.mark.parametrize(
    "text, message",
    [
        ("colour = 'red'\n", "bad.toml:1: colour: unknown key"),
        ("[thresholds]\nexplode = 1\n", "bad.toml:2: thresholds.explode: unknown key"),
        (
            "[thresholds]\nvanish-norm = 'tiny'\n",
            "bad.toml:2: thresholds.vanish-norm: expected a non-negative number",
        ),
        ("fail-on = 'sometimes'\n", "bad.toml:1: fail-on: 'sometimes' is not one of"),
        ("[severity]\nfrozen = 'loud'\n", "bad.toml:2: severity.frozen: unknown severity"),
        ("ignore = ['no-colon']\n", "bad.toml:1: ignore: 'no-colon' is not RULE:GLOB"),
        ("[[inspect]]\nignore = []\n", "inspect.target: every entry needs a target"),
        (
            "[[gradcheck]]\ntarget = 'a:b'\nshapes = {}\n",
            "bad.toml:3: gradcheck.shapes: unknown key",
        ),
        ("[thresholds\n", "bad.toml: invalid TOML"),
    ],
)
def test_bad_files_name_file_key_and_line(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        config.load(str(path), cwd=str(tmp_path))
    assert message in str(info.value).replace(str(tmp_path) + os.sep, "")


def test_missing_config_file(tmp_path):
    with pytest.raises(ConfigError, match="no such config file"):
        config.load(str(tmp_path / "nope.toml"), cwd=str(tmp_path))


def test_threshold_dict_uses_toml_names():
    assert Settings().threshold_dict()["explode-norm"] == Thresholds().explode_norm


def test_documented_examples_parse(tmp_path):
    """The complete example of docs/config.md and the CI blocks of docs/check.md and the README
    are valid configs."""
    import re

    for doc in ("docs/config.md", "docs/check.md", "README.md"):
        text = open(os.path.join(ROOT, doc), encoding="utf-8").read()
        blocks = [
            b for b in re.findall(r"```toml\n(.*?)```", text, re.S) if "[tool.gradscope]" in b
        ]
        assert blocks, doc
        for block in blocks:
            (tmp_path / "pyproject.toml").write_text(block)
            config.load(cwd=str(tmp_path))  # raises ConfigError on any bad key


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_a_threshold_flag_that_would_disable_or_break_a_rule_is_exit_2(runner, value):
    from gradscope.cli import app

    result = runner.invoke(app, ["inspect", "healthy-mlp", "--explode-norm", value])
    assert result.exit_code == 2
    assert "--explode-norm: expected a finite, non-negative number" in result.stderr


@pytest.mark.parametrize("value", ["nan", "inf", "-1.0"])
def test_a_threshold_in_a_file_gets_the_same_check(tmp_path, value):
    path = tmp_path / "gs.toml"
    path.write_text(f"[thresholds]\nexplode-norm = {value}\n")
    with pytest.raises(ConfigError, match=r"thresholds\.explode-norm: expected a finite"):
        load(str(path))


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('[severity]\nexplodng = "warning"\n', "severity.explodng: unknown rule 'explodng'"),
        ('[severity]\nGS999 = "warning"\n', "unknown rule 'GS999'"),
        ('ignore = ["explodng:*"]\n', "ignore: unknown rule 'explodng'"),
    ],
)
def test_unknown_rules_are_named_not_silently_ignored(tmp_path, text, where):
    path = tmp_path / "gs.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=where) as info:
        load(str(path))
    assert "GS104/exploding" in str(info.value)


def test_rule_ids_are_case_insensitive(tmp_path):
    path = tmp_path / "gs.toml"
    path.write_text('ignore = ["gs101:aux.*"]\n[severity]\ngs107 = "warning"\n')
    settings = load(str(path))
    assert settings.ignores == (("GS101", "aux.*"),)
    assert settings.severities == {"GS107": Severity.WARNING}


@pytest.mark.parametrize(
    ("content", "problem"),
    [(b"fail-on = \xff\xfe\n", "not UTF-8"), (b"x = " + b"[" * 100_000, "invalid TOML")],
)
def test_unreadable_config_is_one_line(tmp_path, content, problem):
    path = tmp_path / "gs.toml"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=problem):
        load(str(path))


def test_top_must_be_positive(runner):
    from gradscope.cli import app

    result = runner.invoke(app, ["inspect", "healthy-mlp", "--top", "-5"])
    assert result.exit_code == 2 and "greater than or equal to 1" in result.stderr


def test_the_api_discovers_settings_only_when_asked(tmp_path, monkeypatch):
    import torch

    import gradscope

    (tmp_path / "pyproject.toml").write_text(
        '[tool.gradscope]\nignore = ["none-grad:m.unused.*"]\n'
    )
    monkeypatch.chdir(tmp_path)
    model = torch.nn.ModuleDict({"used": torch.nn.Linear(2, 1), "unused": torch.nn.Linear(2, 1)})

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, x):
            return self.m["used"](x).sum()

    net, x = Net(), torch.randn(3, 2)
    plain = gradscope.inspect(net, x)
    assert {f.subject for f in plain.findings} == {"m.unused.weight", "m.unused.bias"}
    configured = gradscope.inspect(net, x, settings=gradscope.load_settings())
    assert configured.findings == [] and len(configured.ignored) == 2
    settings = gradscope.load_settings()
    assert settings.ignores == (("none-grad", "m.unused.*"),)


def test_every_threshold_is_documented():
    doc = open(os.path.join(ROOT, "docs", "config.md"), encoding="utf-8").read()
    assert [k for k in config.Thresholds.keys() if f"| `{k}` |" not in doc] == []
