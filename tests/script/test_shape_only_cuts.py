"""Hard gates drawn with Gumbel noise made by hand,
`-torch.empty_like(logits).exponential_().log()`, then an argmax: the gate gets no
gradient, and the argmax is why. The live watch of the step counted `empty_like` as a cut
too (its input requires grad, its output does not) and named it first, though it reads
only the logits' shape. Ops that read only a shape are no cut: the argmax alone is named;
the straight-through Gumbel-softmax is silent, and a .detach() before it is still named
as the .detach()."""

from __future__ import annotations

import os

from gradscope.findings import Severity
from tests.watcher.watch_scripts import DOMAINS

GATES = os.path.join(DOMAINS, "gumbel_gates.py")


def _none_grad(mode: str):
    import gradscope

    found = gradscope.inspect_script(GATES, [mode]).findings
    return found, [f for f in found if f.rule == "GS101"]


def test_straight_through_gates_are_silent():
    found, _ = _none_grad("st")
    assert [f for f in found if f.severity >= Severity.WARNING] == [], found


def test_an_argmax_gate_names_the_argmax_and_not_the_noise_shape():
    _, none = _none_grad("argmax")
    assert {f.subject for f in none} == {
        "1.gate.weight",
        "1.gate.bias",
        "2.gate.weight",
        "2.gate.bias",
    }
    evidence = " ".join(e for f in none for e in f.evidence)
    assert "`argmax`" in evidence and "empty_like" not in evidence, evidence


def test_detached_logits_keep_the_detach():
    _, none = _none_grad("detached")
    assert none and all("`detach`" in " ".join(f.evidence) for f in none), none
