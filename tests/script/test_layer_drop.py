"""LayerDrop skips each layer at random in training, so the one step inspect measures can
leave a layer out while its siblings of the same kind run: it was a GS101 error, 'call the
module in forward, delete it'. Read from the forward that skipped it (a `continue` under a
test of a random draw, inside a test of `self.training`, or the layer called only under
such a test, as wav2vec 2.0's encoders do): information. A layer skipped by
its index at every step, in a forward that draws a random number for something else, stays
an error. A residual block whose own forward returns its input early on a random draw in
training (stochastic depth) is information the same way; one that returns early by its
index at every step stays an error."""

from __future__ import annotations

import os

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import DOMAINS

LAYER_DROP = os.path.join(DOMAINS, "layer_drop.py")


def _none_grads(mode: str):
    import gradscope

    found = gradscope.inspect_script(LAYER_DROP, [mode]).findings
    assert {f.rule for f in found} == {"GS101"}, found
    return found


@pytest.mark.parametrize("mode", ["fairseq", "nested", "wav2vec2", "skip-flag"])
def test_a_layer_dropped_at_random_is_information(mode):
    found = _none_grads(mode)
    assert {f.subject for f in found} == {
        f"1.layers.{i}.{k}" for i in (2, 3) for k in ("weight", "bias")
    }
    assert all(f.severity == Severity.INFO and "skipped at random" in f.message for f in found)


@pytest.mark.parametrize("mode", ["odd", "odd-call"])
def test_a_layer_skipped_by_its_index_stays_an_error(mode):
    found = _none_grads(mode)
    assert {f.subject for f in found} == {
        f"1.layers.{i}.{k}" for i in (1, 3) for k in ("weight", "bias")
    }
    assert all(f.severity == Severity.ERROR and "never ran" in f.message for f in found)


def test_a_block_returned_early_at_random_is_information():
    found = _none_grads("stochastic-depth")
    assert found and all(f.severity == Severity.INFO for f in found), found
    assert all("skipped at random" in f.message and "stochastic depth" in f.message for f in found)


def test_a_block_returned_early_by_its_index_stays_an_error():
    found = _none_grads("odd-blocks")
    assert {f.subject for f in found} == {
        f"1.layers.{i}.layer.{k}" for i in (1, 3) for k in ("weight", "bias")
    }
    assert all(f.severity == Severity.ERROR for f in found)
