"""Whether an optimizer whose class gradscope does not know steps Adam's rule, from what
was measured at its first steps: the update (update/weight ratio × the weights' initial
norm, updates.py) against Adam's update from the optimizer's own state, lr × ‖m̂/(√v̂ + eps)‖
(watcher/adam_eps.py). No torch.

An Adam clone's two agree to its decay's few percent; Prodigy's state gives Adam's update
times 1/d (its moments are d-scaled and its step is d·lr), a thousandfold and more apart:
its eps is then not read as Adam's."""

from __future__ import annotations

import math
from collections.abc import Iterable

from gradscope.steps.records import WatchRun
from gradscope.steps.state_facts import EpsSample

AGREE = 2.0
"""The measured update within this factor of Adam's, either way."""


def adam_measured(run: WatchRun, index: int, samples: Iterable[EpsSample]) -> bool:
    """More than half of the tensors compared (at least one) moved by Adam's update."""
    wanted = {s.step: s for s in samples if s.predicted}
    if not wanted:
        return False
    agree = compared = 0
    for r in run.steps:
        if r.optimizer != index or r.step not in wanted or r.update_ratios is None:
            continue
        for position, norm in wanted[r.step].predicted:
            measured = _measured(run, r.update_ratios, position)
            group = run.params[position].group if position < len(run.params) else None
            if measured is None or group is None or group >= len(r.lrs):
                continue
            predicted = r.lrs[group] * norm
            if not (math.isfinite(predicted) and predicted > 0):
                continue
            compared += 1
            agree += 1 / AGREE <= measured / predicted <= AGREE
    return compared > 0 and agree * 2 > compared


def _measured(run: WatchRun, ratios: tuple[float, ...], position: int) -> float | None:
    """‖Δw‖ at one of the first steps: its ratio to the weights, times their initial norm."""
    if position >= len(ratios) or position >= len(run.params):
        return None
    ratio, norm = ratios[position], run.params[position].weight_norm
    if norm is None or not (math.isfinite(ratio) and norm > 0):
        return None
    return ratio * norm
