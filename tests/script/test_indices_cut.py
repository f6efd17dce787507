"""A Mixture-of-Depths router read only for its top-k indices (the routed outputs never
scaled by the router's weights) gets no gradient. The live watch of the step took `topk`
for a differentiable op (its values carry a gradient), so GS101 named no op and advised
finding a .detach(). Its indices carry none: a parameter that reaches the loss only
through them is cut there, named with the fix (scale what was selected by the selected
values). The router whose weights scale the routed outputs is silent."""

from __future__ import annotations

import os

from gradscope.findings import Severity
from gradscope.rules.grads import INDEX_CUT
from tests.watcher.watch_scripts import DOMAINS

ROUTED = os.path.join(DOMAINS, "routed_depth.py")


def _found(mode: str):
    import gradscope

    return gradscope.inspect_script(ROUTED, [mode]).findings


def test_a_router_whose_weights_scale_the_outputs_is_silent():
    found = _found("scaled")
    assert [f for f in found if f.severity >= Severity.WARNING] == [], found


def test_a_router_read_for_its_indices_alone_is_cut_at_topk():
    none = [f for f in _found("indices") if f.rule == "GS101"]
    routers = {f"{k}.router.{w}" for k in (1, 2) for w in ("weight", "bias")}
    assert {f.subject.removeprefix("Sequential.") for f in none} == routers, none
    for f in none:
        assert any(INDEX_CUT in e and "`topk`" in e for e in f.evidence), f.evidence
        assert "scale what was selected by the selected values" in f.advice
