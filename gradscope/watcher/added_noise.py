"""The noise a differentially private optimizer adds to the gradient it writes.

DP-SGD clips each sample's gradient to a norm C, sums them, adds Gaussian noise of std
sigma·C and divides by the expected batch size B: each element of the gradient the inner
optimizer applies carries noise of std sigma·C/B, whatever the data say. At sigma = 1, C = 1,
B = 64 that is 0.016 an element, a norm of about 2.5 for 26k parameters: the gradient is
almost all noise, and the learning rate moves the weights by about lr × that. Nothing in
the gradients tells the noise apart from the signal, so the settings are read where the
wrapper keeps them, by the names Opacus's DPOptimizer gives them (`noise_multiplier`,
`max_grad_norm`, `expected_batch_size`, `loss_reduction`): naming them is the only
evidence there is. The wrapper is found by mechanism (wrapped_steps.wrapper_stepping)."""

from __future__ import annotations

import math
from typing import Any

from gradscope.watcher.wrapped_steps import wrapper_stepping


def added_noise(optimizer: Any) -> tuple[float, float, float] | None:
    """(sigma, C, the std of the noise on each element of the gradient the step applies) of
    the wrapper stepping `optimizer`; None: no wrapper, or none that adds noise."""
    wrapper = wrapper_stepping(optimizer)
    if wrapper is None:
        return None
    sigma = _number(getattr(wrapper, "noise_multiplier", None))
    clip = _number(getattr(wrapper, "max_grad_norm", None))
    if sigma is None or clip is None or sigma <= 0:
        return None
    per_element = sigma * clip
    if getattr(wrapper, "loss_reduction", "mean") == "mean":
        batch = _number(getattr(wrapper, "expected_batch_size", None))
        if batch is None or batch <= 0:
            return None
        per_element /= batch
    return sigma, clip, per_element


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None
