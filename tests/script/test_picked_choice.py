"""A one-shot supernet (SPOS) runs one candidate per choice block at each step, picked by an
index at run time (`blocks[i](x)`), so the one step inspect measures leaves the others
without a gradient: GS101 called each an error, 'call the module in forward, delete it'.
One candidate of an alike list run, called by a non-constant index in a forward above the
list: information, with `gradscope watch` for a candidate never picked. A list of which
two candidates run at every step (summed by a loop index) and the third never does stays
an error. A slimmable network's switchable BatchNorm (`bn = self.bn[idx]`, one per width)
inspected at its first width is the same; one BatchNorm sliced for every width, the others
never run, stays an error."""

from __future__ import annotations

import os

from gradscope.findings import Severity
from tests.watcher.watch_scripts import DOMAINS

SUPERNET = os.path.join(DOMAINS, "supernet_paths.py")
SLIMMABLE = os.path.join(DOMAINS, "slimmable_bn.py")


def _none_grads(mode: str, script: str = SUPERNET):
    import gradscope

    found = gradscope.inspect_script(script, [mode]).findings
    assert {f.rule for f in found} == {"GS101"}, found
    return found


def test_candidates_left_out_of_the_sampled_path_are_information():
    found = _none_grads("spos")
    assert len(found) == 8 and all(f.severity == Severity.INFO for f in found), found
    assert all("one-shot supernet's sampled path" in f.message for f in found)
    assert all("gradscope watch" in f.advice for f in found)


def test_a_candidate_no_index_reaches_stays_an_error():
    found = _none_grads("first-two")
    assert {f.subject for f in found} == {
        f"choices.{k}.2.{w}" for k in (0, 1) for w in ("weight", "bias")
    }
    assert all(f.severity == Severity.ERROR and "never ran" in f.message for f in found)


def test_the_batchnorms_of_the_other_widths_are_information():
    found = _none_grads("switchable", SLIMMABLE)
    assert {f.subject for f in found} == {"norm.bn.0.weight", "norm.bn.0.bias"}, found
    assert all(f.severity == Severity.INFO for f in found)


def test_one_batchnorm_for_every_width_leaves_the_others_an_error():
    found = _none_grads("shared", SLIMMABLE)
    assert {f.subject for f in found} == {"norm.bn.0.weight", "norm.bn.0.bias"}, found
    assert all(f.severity == Severity.ERROR and "never ran" in f.message for f in found)
