"""Pairing names: wrappers, prefixes, the name map, shapes (no torch)."""

from __future__ import annotations

import json

import pytest

from gradscope.diff import align
from gradscope.errors import ConfigError


def test_same_names_pair_by_name():
    p = align.pair_names(["a.weight", "b.bias"], ["b.bias", "a.weight"])
    assert p.pairs == {"a.weight": ("a.weight", "name"), "b.bias": ("b.bias", "name")}
    assert p.ref_only == () and p.new_only == ()


def test_wrapper_segments_are_stripped_anywhere():
    ref = ["h.0.attn.weight", "head.weight"]
    new = ["module._orig_mod.h.0._checkpoint_wrapped_module.attn.weight", "_orig_mod.head.weight"]
    p = align.pair_names(ref, new)
    assert {r: n for r, (n, _) in p.pairs.items()} == dict(zip(ref, new, strict=True))
    assert {h for _, h in p.pairs.values()} == {"stripped"}


def test_leading_prefixes_found_from_the_names():
    ref = ["model.layers.0.q.weight", "model.norm.weight", "lm_head.weight"]
    new = ["transformer.layers.0.q.weight", "transformer.norm.weight", "head.weight"]
    p = align.pair_names(ref, new)
    assert p.prefixes == ("model.", "transformer.")
    assert p.pairs["model.norm.weight"] == ("transformer.norm.weight", "prefix")
    assert p.ref_only == ("lm_head.weight",) and p.new_only == ("head.weight",)


def test_name_map_exact_and_prefix_entries_win():
    names = align.name_map({"lm_head.weight": "head.weight", "model.": "body."})
    p = align.pair_names(
        ["lm_head.weight", "model.x.weight"], ["head.weight", "body.x.weight"], names
    )
    assert p.pairs == {
        "lm_head.weight": ("head.weight", "map"),
        "model.x.weight": ("body.x.weight", "map"),
    }


def test_each_new_name_is_used_once():
    p = align.pair_names(["module.w", "w"], ["w"])
    assert p.pairs == {"w": ("w", "name")} and p.ref_only == ("module.w",)


@pytest.mark.parametrize(
    ("a", "b", "kind"),
    [((4, 8), (4, 8), "same"), ((4, 8), (8, 4), "transposed"), ((4, 8), (4, 9), "shape")],
)
def test_classify_shapes(a, b, kind):
    assert align.classify(a, b) == kind


def test_name_map_files_toml_and_json(tmp_path):
    toml = tmp_path / "names.toml"
    toml.write_text('[names]\n"a.weight" = "b.weight"\n"enc." = "encoder."\n')
    m = align.load_name_map(str(toml))
    assert m.translate("a.weight") == "b.weight" and m.translate("enc.x") == "encoder.x"
    js = tmp_path / "names.json"
    js.write_text(json.dumps({"a": "b"}))
    assert align.load_name_map(str(js)).translate("a") == "b"


@pytest.mark.parametrize("text", ['"a" = 3\n', "not toml [", ""])
def test_bad_name_map_is_a_config_error(tmp_path, text):
    f = tmp_path / "names.toml"
    f.write_text(text)
    if text == "":
        assert align.load_name_map(str(f)).translate("a") is None
        return
    with pytest.raises(ConfigError, match="--name-map"):
        align.load_name_map(str(f))


def test_missing_name_map_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="--name-map"):
        align.load_name_map(str(tmp_path / "absent.toml"))
