"""--wandb: a real offline wandb run read back from its own file: the series, one log call
per step, findings as alerts and in the summary, one heatmap image, the user's run untouched."""

from __future__ import annotations

import glob
import importlib.util

import pytest
from sink_runs import close, in_the_sinks_process, report_series, watched
from wandb_records import finished_run

# wandb imported in the tests: not in a worker that never runs them
pytestmark = [
    pytest.mark.slow,  # a wandb run starts its service process
    pytest.mark.skipif(importlib.util.find_spec("wandb") is None, reason="needs wandb"),
]


def test_the_series_findings_and_heatmap_reach_an_offline_run(wandb_offline, monkeypatch, tmp_path):
    import wandb

    calls = tmp_path / "calls"
    in_the_sinks_process(
        monkeypatch,
        tmp_path / "site",
        f"""
        from wandb.sdk.wandb_run import Run

        real = Run.log

        def log(self, data, *args, **kwargs):
            with open({str(calls)!r}, "a") as out:
                out.write("log\\n")
            return real(self, data, *args, **kwargs)

        Run.log = log
        """,
    )
    report = watched(30, wandb="gs-test")
    assert report.judged and not report.run.unwritten, report.run.unwritten
    assert wandb.run is None  # the run gradscope started, finished
    run = finished_run(str(wandb_offline))
    for tag in ("loss", "grad_norm/total", "lr"):
        got = run.series("gradscope/" + tag)
        want = report_series(report, tag)
        assert sorted(got) == sorted(want) == list(range(1, 31))
        assert all(close(got[s], want[s]) for s in want), tag
    # one call per step and one for the picture, never one per value
    assert len(calls.read_text().splitlines()) == 31
    scalars = {k for row in run.history for k in row if not k.startswith("_")}
    scalars = {k for k in scalars if not k.startswith("gradscope/grad_norm/layers")}
    assert len(scalars - {"gradscope/step"}) <= 12
    images = [row for row in run.history if row.get("gradscope/grad_norm/layers/_type")]
    assert [row["gradscope/grad_norm/layers/_type"] for row in images] == ["image-file"]
    assert run.exit


def test_findings_are_alerts_and_in_the_summary(wandb_offline):
    report = watched(40, forget_zero_grad=True, wandb="gs-test")
    rules = sorted({f.rule for f in report.findings})
    assert "GS412" in rules and not report.run.unwritten
    run = finished_run(str(wandb_offline))
    titles = [a.title for a in run.alerts]
    assert sorted(t.split()[1] for t in titles) == sorted(f.rule for f in report.findings)
    assert len(set(titles)) == len(titles)  # wandb holds back a title repeated within a minute
    assert run.summary["gradscope/rules"] == rules
    assert "GS412" in run.summary["gradscope/findings"]


def test_beside_the_users_run_a_run_of_its_own_in_its_group(wandb_offline):
    """The user's run keeps its step counter: what it logs at an explicit step= after
    gradscope's steps is kept (logging into it dropped it, "less than the current step")."""
    import wandb

    mine = wandb.init(project="users-own", group="sweep-3")
    try:
        mine.log({"my_metric": 0.0}, step=0)
        report = watched(12, wandb="ignored-project")
        assert not report.run.unwritten
        assert wandb.run is mine  # not replaced, not finished by gradscope
        for i in range(1, 4):
            mine.log({"my_metric": float(i)}, step=i)
    finally:
        mine.finish()
    users = finished_run(str(wandb_offline), mine.id)
    assert [row["my_metric"] for row in users.history if "my_metric" in row] == [0, 1, 2, 3]
    assert not any(k.startswith("gradscope/") for row in users.history for k in row)
    runs = glob.glob(str(wandb_offline / "wandb" / "offline-run-*"))
    (own,) = [p for p in runs if mine.id not in p]
    ours = finished_run(str(wandb_offline), own.rsplit("-", 1)[1])
    assert (ours.group, ours.job_type) == ("sweep-3", "gradscope")
    assert sorted(ours.series("gradscope/loss")) == list(range(1, 13)) and ours.exit


def test_a_failing_wandb_stops_the_sink_not_the_run(wandb_offline, monkeypatch, tmp_path):
    import wandb

    in_the_sinks_process(
        monkeypatch,
        tmp_path / "site",
        """
        from wandb.sdk.wandb_run import Run

        def broken(self, *args, **kwargs):
            raise ConnectionError("the network went away")

        Run.log = broken
        """,
    )
    report = watched(25, wandb="gs-test")
    assert report.run.status == "completed" and len(report.run.steps) == 25
    (line,) = report.run.unwritten
    assert line.startswith("--wandb gs-test: writing failed at step 1 (ConnectionError")
    assert line in report.run.notes and wandb.run is None
