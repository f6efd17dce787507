"""Each tracked parameter's norm as first seen: those tracked at the first step are read
before its update; one found later (a teacher copy handed to the optimizer, whose forward
first ran under no_grad) is read at the first step that tracks it, so whether a copy
changed its values can be told for it too."""

from __future__ import annotations

import torch

from gradscope.watcher.measure import Measure, norm_vector


def extended(first: torch.Tensor | None, measure: Measure) -> torch.Tensor:
    """`first` with the norms of the parameters tracked since appended (every norm where
    none was read yet)."""
    params = measure.tracked.params
    if first is None:
        return measure.weights()
    if len(first) >= len(params):
        return first
    new = norm_vector(params[len(first) :]).to(first.device, first.dtype)
    return torch.cat([first, new])
