"""A complex parameter (a learned frequency filter) is watched through every step under
Adam, AdamW with amsgrad, SGD and RMSprop: Adam steps it as its real view, and its state is
read the same way (the eps count compared a complex v with a float and stopped the watch at
step 1)."""

from __future__ import annotations

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import watched

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("optimizer", ["adam", "adamw-amsgrad", "sgd", "rmsprop"])
def test_a_complex_parameter_is_watched_to_the_end(optimizer):
    report = watched("complex_params.py", optimizer)
    data = report.to_dict()
    assert data["summary"]["steps"] == 30, data["summary"]
    assert not data["summary"]["internal_errors"], data["summary"]["internal_errors"]
    assert [f for f in report.findings if f.severity >= Severity.WARNING] == []
    names = {row["name"] for row in data["params"]}
    assert "w" in names, names
