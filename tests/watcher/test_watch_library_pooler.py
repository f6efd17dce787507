"""A pooler that runs and never reaches the loss because the library's own model drops its
output (EncoderDecoderModel keeps its BertModel encoder's last_hidden_state, as
sentence-transformers' models.Transformer does under mean pooling): GS413 said WARNING
'it never learns' on every such healthy run. It is information naming the library's class
now; a model's output the script itself drops (a classifier's logits left out of the
loss, the script's own module pooling last_hidden_state) stays a warning."""

from __future__ import annotations

import pytest

from tests.watcher.watch_scripts import domain_watched

pytest.importorskip("transformers")


def _never(mode: str) -> dict[str, str]:
    watched = domain_watched("library_pooler.py", mode)
    assert not watched.faults, watched.internal_error()
    return {f.subject: f.severity.name.lower() for f in watched.findings if f.rule == "GS413"}


def test_a_pooler_the_library_drops_is_information():
    never = _never("encoder-decoder")
    assert never == {
        "encoder.pooler.dense.weight": "info",
        "encoder.pooler.dense.bias": "info",
    }


def test_logits_the_script_drops_stay_a_warning():
    never = _never("logits-dropped")
    assert never["classifier.weight"] == "warning"
    assert never["bert.pooler.dense.weight"] == "warning"


def test_a_pooler_the_scripts_own_module_drops_stays_a_warning():
    assert _never("own-wrapper") == {
        "bert.pooler.dense.weight": "warning",
        "bert.pooler.dense.bias": "warning",
    }
