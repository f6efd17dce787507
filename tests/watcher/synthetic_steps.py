"""Long synthetic runs fed through the recorder as the interception feeds it (PendingStep
tensors, read back every 10 steps): for the memory bound and the verdict-equality tests."""

from __future__ import annotations

import math
import random

import torch

from gradscope.steps.records import ParamInfo, WatchRun
from gradscope.watcher.recorder import PendingStep, Recorder

PARAMS = (
    ParamInfo("enc.weight", (4, 4), True, True, 0.1),
    ParamInfo("enc.bias", (4,), True, True, 0.1),
    ParamInfo("head.weight", (4, 4), True, True, 0.1),
    ParamInfo("head.bias", (4,), True, True, 0.1),
    ParamInfo("aux.weight", (4, 4), True, True, 0.1),
    ParamInfo("aux.bias", (4,), True, True, 0.1),
    ParamInfo("unused.weight", (4, 4), True, True, 0.1),
    ParamInfo("frozen.weight", (4, 4), True, False, None),
)
UPDATE_EVERY = 25


def troubled_step(n: int, rng: random.Random, steps: int) -> PendingStep:
    """Step n of a run with one of everything the per-tensor rules look for: spikes of
    the norm and the loss, one step with a NaN tensor, head.weight frozen (None) after
    60% of the run, aux.weight zeroed after 2/3, unused.weight never a gradient,
    frozen.weight outside the optimizer, enc.weight updated far too fast."""
    norm = [rng.lognormvariate(0, 0.2) for _ in PARAMS]
    if n in (steps * 7 // 30, steps // 2):
        norm[0] *= 40.0  # a norm spike driven by enc
    if n == steps * 5 // 6:
        norm[1] = math.nan
    if n > steps * 3 // 5:
        norm[2] = -1.0  # grad None
    if n > steps * 2 // 3:
        norm[4] = 0.0
    norm[6] = -1.0
    loss = 2.0 * math.exp(-n / steps) * rng.lognormvariate(0, 0.1)
    if n == steps * 3 // 10:
        loss *= 30.0
    update = weight = None
    if (n - 1) % UPDATE_EVERY == 0:
        ratio = [0.5 * rng.lognormvariate(0, 0.3)] + [1e-3 * rng.lognormvariate(0, 0.3)] * 7
        weight = torch.ones(len(PARAMS), dtype=torch.float64)
        update = torch.tensor(ratio, dtype=torch.float64)
    return PendingStep(
        step=n,
        optimizer=0,
        lrs=(0.1,),
        backward_calls=1,
        skipped=False,
        param_norm=torch.tensor(norm, dtype=torch.float64),
        loss=loss,
        update_norm=update,
        weight_norm=weight,
        time_s=n * 0.01,
    )


def recorded(steps: int, detail_steps: int, seed: int = 0) -> WatchRun:
    """The troubled run of `steps` steps, recorded with that per-tensor bound."""
    from gradscope.steps.step_store import StepStore

    rng = random.Random(seed)
    recorder = Recorder(flush_every=10)
    recorder.records = StepStore(detail_steps)
    for n in range(1, steps + 1):
        recorder.add(troubled_step(n, rng, steps))
    recorder.flush()
    return WatchRun(
        "script train.py",
        PARAMS,
        recorder.records,
        "completed",
        1.0,
        optimizers=("SGD",),
        members=(tuple(range(len(PARAMS) - 1)),),
        update_every=UPDATE_EVERY,
    )
