"""A masked mean (`(nll * mask).sum() / mask.sum()`: a pointer network's or a padded
sequence model's loss over its valid steps) divides by what its mask keeps, a count the
batch gives: no gradient accumulation is said. A sum scaled by a number and divided by a
tensor, or a masked sum divided by anything but its mask's count, still is."""

from __future__ import annotations

import torch

from gradscope.inspector import script_facts


def _nll(n: int = 12) -> torch.Tensor:
    return torch.linspace(0.1, 2.0, n).requires_grad_() * 1.0


def test_a_masked_mean_over_a_boolean_mask_is_no_accumulation():
    mask = torch.arange(12) < 7
    assert script_facts.loss_scaling((_nll() * mask).sum() / mask.sum()) is None


def test_a_masked_mean_over_a_float_mask_with_a_clamped_count_is_no_accumulation():
    mask = (torch.arange(12) % 3 != 0).float().reshape(3, 4)
    nll = _nll().reshape(3, 4)
    assert script_facts.loss_scaling((mask * nll).sum() / mask.sum().clamp(min=1)) is None


def test_a_sum_scaled_by_a_number_over_a_tensor_is_still_said():
    said = script_facts.loss_scaling((_nll() * 3).sum() / torch.tensor(4.0))
    assert said is not None and "/ 4: gradient accumulation?" in said


def test_a_masked_sum_over_a_python_number_is_still_said():
    mask = torch.arange(12) < 7
    said = script_facts.loss_scaling((_nll() * mask).sum() / 4)
    assert said is not None and "/ 4: gradient accumulation?" in said
