"""A parameter the loss never reaches (an encoder's pooler under mean pooling, as a
sentence embedding trained through the HF Trainer leaves BertModel's) under a learning
rate decayed linearly to 0 at the last step (the Trainer's default schedule): GS410 read
the group's final lr, 0, and said 'its param group's learning rate is 0' beside GS413's
'got no gradient'. No gradient is GS413's verdict whatever the lr."""

from __future__ import annotations

import pytest

from tests.watcher.watch_scripts import domain_watched


@pytest.fixture(scope="module")
def decayed():
    return domain_watched("unused_pooler.py", "linear")


def test_no_gradient_is_not_read_as_a_learning_rate_of_0(decayed):
    assert not decayed.faults, decayed.internal_error()
    assert decayed.run.params[0].lr is not None
    assert not [f for f in decayed.findings if f.rule == "GS410"], decayed.findings
    never = sorted(f.subject for f in decayed.findings if f.rule == "GS413")
    assert never == ["pooler.bias", "pooler.weight"]
