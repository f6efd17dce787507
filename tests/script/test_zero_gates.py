"""A residual branch behind a gate that starts at zero gets no gradient at step one, by design:
ReZero's alpha (a 1-element parameter of the block, not named weight or gate, owned by the
module that runs before its branch), SkipInit's 0-d skip_gain, Flamingo's tanh(gate) owned
by the same block. All were read as dead layers (GS106 warnings), as the branch ran after the
gate's module. Read in the graph now: a product with a zero parameter. The same gate frozen
never moves (a warning that names it, where it was told as a loss weight off for a warm-up);
a dead ReLU beside the gates still warns. timm's LayerScale in a module of its own (`ls1`)
scales its block's branch: the branch's tiny gradients were the median the rest was judged
against (GS104 errors) and read as vanishing (GS105 warnings)."""

from __future__ import annotations

import os

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import DOMAINS

GATES = os.path.join(DOMAINS, "zero_gates.py")


def _findings(mode: str):
    import gradscope

    return gradscope.inspect_script(GATES, [mode]).findings


def _loud(found):
    return [f for f in found if f.severity >= Severity.WARNING]


@pytest.mark.parametrize(
    ("mode", "gates"),
    [
        ("rezero", ["blocks.0.alpha", "blocks.1.alpha"]),
        ("skipinit", ["blocks.0.skip_gain", "blocks.1.skip_gain"]),
        ("tanh", ["blocks.0.attn_gate"]),
    ],
)
def test_a_branch_behind_a_zero_gate_is_zero_init_by_design(mode, gates):
    found = _findings(mode)
    assert _loud(found) == [], found
    told = [f for f in found if f.rule == "GS108"]
    assert len(told) == 1 and all(g in told[0].message for g in gates), found


def test_a_frozen_zero_gate_is_named_as_never_moving():
    found = _findings("frozen")
    zero = [f for f in found if f.rule == "GS106"]
    assert len(zero) == 16 and all(f.severity == Severity.WARNING for f in zero), found
    assert all("blocks.0.alpha" in f.message and "frozen" in f.message for f in zero)
    assert not any("loss weight" in f.message for f in found)


def test_a_dead_relu_beside_the_gates_still_warns():
    found = _findings("dead")
    assert {f.subject for f in _loud(found)} == {"side.weight", "side.bias"}, found
    assert all(f.rule == "GS106" for f in _loud(found))


def test_a_layer_scale_in_its_own_module_is_no_explosion():
    assert _findings("layerscale") == []
