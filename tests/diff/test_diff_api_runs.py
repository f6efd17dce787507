"""`gradscope.api.diff` on two runs' `--log` files: what `gradscope diff A.jsonl B.jsonl`
does, from Python, with its plot."""

from __future__ import annotations

import pytest
from runs_logs import write

from gradscope import api
from gradscope.config import load
from gradscope.diff.runs.result import RunsDiff
from gradscope.errors import GradscopeError

STEPS = list(range(1, 41))


def _grown(step, norms, loss):
    if step >= 20:
        norms = [norms[0] * 3.0, *norms[1:]]
    return norms, loss


def test_two_logs_diff_as_runs_judged_and_drawn(tmp_path):
    ref = write(tmp_path / "ref.jsonl", STEPS)
    new = write(tmp_path / "new.jsonl", STEPS, change=_grown)
    result = api.diff(str(ref), str(new), plot=str(tmp_path / "runs.png"))
    assert isinstance(result, RunsDiff) and result.differs
    assert result.first is not None and result.first.step == 20
    assert "GS607" in {f.rule for f in result.findings}
    assert (tmp_path / "runs.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    document = result.outcome().to_dict()
    assert document["kind"] == "diff" and document["mode"] == "runs"
    assert list(document)[:6] == ["version", "tool", "kind", "label", "findings", "ignored"]


def test_the_settings_judge_a_runs_diff(tmp_path):
    ref = write(tmp_path / "ref.jsonl", STEPS)
    new = write(tmp_path / "new.jsonl", STEPS, change=_grown)
    (tmp_path / "gs.toml").write_text('ignore = ["GS607:*"]\n')
    settings = load(str(tmp_path / "gs.toml"))
    result = api.diff(str(ref), str(new), settings=settings)
    outcome = result.outcome()
    assert "GS607" not in {f.rule for f in outcome.findings}
    assert "GS607" in {f.rule for f in outcome.ignored}


def test_a_plot_that_names_no_picture_is_refused_before_reading(tmp_path):
    ref = write(tmp_path / "ref.jsonl", STEPS)
    with pytest.raises(GradscopeError, match=r"give a \.png, \.svg or \.pdf"):
        api.diff(str(ref), str(ref), plot=str(tmp_path / "runs.txt"))
