"""Tensors swapped inside an optimizer's param groups (3D Gaussian splatting's densification
and pruning: `group["params"][0] = nn.Parameter(...)`, the Adam state moved over): the new
ones are tracked from that step, the old ones are no parameter outside every optimizer, and
a gradient norm's jump on the new set is not a bad batch's."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch
from watch_scripts import domain_watched, step_record

import gradscope
from gradscope.config import Thresholds
from gradscope.findings import Severity
from gradscope.rules.step_norm_spike import norm_spike
from gradscope.steps.records import ParamInfo, WatchRun


@pytest.fixture(scope="module")
def swapped():
    return domain_watched("gaussian_densify.py", "swap")


def test_densification_swapping_tensors_in_the_optimizer_is_silent(swapped):
    assert swapped.run.status == "completed"
    assert not [f for f in swapped.findings if f.rule == "GS411"]
    assert not [f for f in swapped.findings if f.severity >= Severity.WARNING]


def test_the_swapped_in_tensors_are_tracked_and_the_old_ones_marked(swapped):
    params = swapped.run.params
    old = [p for p in params if p.replaced_after is not None]
    assert {p.replaced_after for p in old} == {9, 19, 29}  # swapped in before steps 10, 20, 30
    assert all("replaced in the optimizer after step" in p.name for p in old)
    live = [i for i, p in enumerate(params) if p.in_optimizer]
    assert len(live) == 4  # the four attributes' last tensors
    last = swapped.run.steps[-1]
    assert all(last.param_norms[i] is not None and last.param_norms[i] > 0 for i in live)


def test_a_group_added_mid_run_is_tracked_and_nothing_retired():
    run = domain_watched("gaussian_densify.py", "grow")
    assert not [f for f in run.findings if f.rule == "GS411"]
    gain = [p for p in run.run.params if p.shape == (1,)]
    assert len(gain) == 1 and gain[0].in_optimizer and gain[0].replaced_after is None


def test_new_tensors_left_out_of_the_optimizer_still_stop_learning():
    """The bug: the model's points replaced, the optimizer still holding the old ones:
    those stop getting gradients at the step after the densification, all of them at
    once while the backward still runs, which the advice reads as new tensors the
    optimizer was not given."""
    run = domain_watched("gaussian_densify.py", "stale")
    stopped = [f for f in run.findings if f.rule == "GS417"]
    assert len(stopped) == 4 and all(f.steps[0] == 11 for f in stopped)
    assert all(p.replaced_after is None for p in run.run.params)
    assert all("new tensors in place of these just before step 11" in f.advice for f in stopped)
    assert all('group["params"][i] = new' in f.advice for f in stopped)


def _spiked_run(swap_after: int | None) -> WatchRun:
    norms = [1.0 + 0.02 * (i % 3) for i in range(60)]
    norms[40] = 6.0  # step 41
    records = tuple(step_record(i + 1, n, loss=1.0 - i * 0.01) for i, n in enumerate(norms))
    params = (
        ParamInfo("w", (4,), True, True, 0.1),
        ParamInfo("old", (3,), True, False, 0.1, replaced_after=swap_after),
    )
    return WatchRun("t", params, records, "completed", 1.0, optimizers=("Adam",))


def test_a_norm_jump_right_after_a_swap_is_information_and_one_elsewhere_warns():
    after = norm_spike(_spiked_run(39), Thresholds())
    assert [f.severity for f in after] == [Severity.INFO]
    assert "swapped for new ones after step 39" in after[0].message
    for elsewhere in (None, 30):
        found = norm_spike(_spiked_run(elsewhere), Thresholds())
        assert [f.severity for f in found] == [Severity.WARNING]


def test_old_tensors_the_loss_still_reaches_after_the_swap_are_left_out():
    """The reverse bug: the new tensors went to the optimizer, the renderer still uses the
    old ones, whose gradients pile up with no step to apply them: still GS411's error."""
    run = domain_watched("gaussian_densify.py", "unused")
    left = [f for f in run.findings if f.rule == "GS411"]
    assert len(left) == 4 and all(f.severity == Severity.ERROR for f in left)
    assert all("replaced in the optimizer after step 9" in f.subject for f in left)


def test_a_tensor_swapped_out_and_reached_no_more_is_freed_during_the_watch():
    """A densifying run swaps every 100 steps for 15,000: the watch holds no generation the
    script dropped (it and its gradient freed at the next swap), only a stand-in."""
    torch.manual_seed(0)
    points = torch.nn.Parameter(torch.randn(64, 3))
    opt = torch.optim.Adam([points], lr=1e-2)
    generations = []
    with gradscope.watch() as w:
        for step in range(1, 16):
            opt.zero_grad()
            (points**2).sum().backward()
            opt.step()
            if step % 5 == 0:  # densify: a new tensor in the group, the old one dropped
                generations.append(weakref.ref(points))
                points = torch.nn.Parameter(torch.cat([points.detach(), points.detach()[:8]]))
                opt.param_groups[0]["params"][0] = points
                opt.state.clear()
        gc.collect()
        assert generations[0]() is None  # let go at the second swap
    assert w.report.run.status == "completed"
    assert not [f for f in w.report.findings if f.severity >= Severity.WARNING]
