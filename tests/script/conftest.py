"""Fixtures of the script tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def nan_filled_empty():
    """Every allocation torch leaves uninitialised (torch.empty and its kin) holds NaN:
    torch's deterministic mode fills such memory, which by chance may hold NaN bit
    patterns anyway."""
    import torch
    import torch.utils.deterministic as det

    was, warn, fill = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        det.fill_uninitialized_memory,
    )
    torch.use_deterministic_algorithms(True, warn_only=True)
    det.fill_uninitialized_memory = True
    assert torch.isnan(torch.empty(3)).all()  # the premise of every test here
    yield
    torch.use_deterministic_algorithms(was, warn_only=warn)
    det.fill_uninitialized_memory = fill
