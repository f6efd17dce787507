"""Parity of the Lightning callback with
`gradscope watch` on the same script, for every seeded bug."""

from __future__ import annotations

import pytest

pytest.importorskip("lightning")

from parity_bugs import BUGS
from parity_compare import assert_parity, both

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def runs():
    return {bug: both("lightning_train.py", bug) for bug in BUGS}


@pytest.mark.parametrize("bug", BUGS)
def test_lightning_same_rules_and_steps_as_watch(runs, bug):
    assert_parity(bug, *runs[bug])
