"""`gradscope watch --nproc-per-node 2` when a rank fails, the launch is stopped, or a rank
waits on its own child process (slow: one 2-rank gloo launch per case, shared by its tests).

Each case checks what a user sees: the launch's exit code in gradscope's contract, rank
0's JSON report and `--log`, the hang block, and that no process of the run is left.
Every process of a launch carries a word of its own (`--tag`) so leftovers can be found.
The hangs are each rank's watchdog's to end, not torchrun's, and a rank's sys.exit is
handed over to rank 0 as a raise is: those runs share one launch with test_dist_watch.py's
(`shared_runs`, tests/distributed/shared_launch.py), where a run's code is rank 0's and
what may be left of it is what its script started; so does a collective only one rank
issues (a DDP run of scripts/hang_train.py; test_dist_hang.py has the watchdog's code
through `--nproc-per-node`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass

import hang_lines
import pytest
import shared_launch

pytestmark = pytest.mark.slow
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts", "rank_fail_train.py")
HANG_TIMEOUT_S = 2
LEFT_WAIT_S = 3.0
"""How long torchrun's own teardown may take after the launcher returned."""


@dataclass
class Launch:
    code: int
    summary: dict | None
    """Rank 0's JSON report's summary (None: no report written)."""
    log_lines: int
    """The log's header and step lines (its last line, the findings, apart)."""
    stderr: str
    left: list[str]
    """Processes of the run still there LEFT_WAIT_S after the launcher returned."""
    log_findings: list[str]
    """The log's findings lines: one, the last, where rank 0 judged the run."""

    @property
    def notes(self) -> list[str]:
        return self.summary["notes"] if self.summary else []

    def hang_block(self) -> list[str]:
        return [ln for ln in self.stderr.splitlines() if ln.startswith("gradscope: ")]


def launch(tmp, *script_args, watch_args=(), stop=None) -> Launch:
    """Run `gradscope watch SCRIPT --nproc-per-node 2` to its end; `stop` ("group" or
    "launcher"): send SIGTERM once rank 0's log holds 4 steps, to the launcher's whole
    process group (as `timeout -s TERM` does) or to the launcher alone (as Kubernetes)."""
    tag = "gs" + uuid.uuid4().hex[:12]
    report, log, err = tmp / "report.json", tmp / "steps.jsonl", tmp / "stderr.txt"
    cmd = [
        *(sys.executable, "-m", "gradscope", "watch", SCRIPT, "--nproc-per-node", "2"),
        *("-f", "json", "-o", str(report), "--log", str(log), *watch_args),
        *("--", "--tag", tag, *script_args),
    ]
    with open(err, "w") as sink:
        proc = subprocess.Popen(
            cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=sink, start_new_session=True
        )
        try:
            if stop is not None:
                _wait_for_steps(log, 4, proc)
                if stop == "group":
                    os.killpg(proc.pid, signal.SIGTERM)
                else:
                    os.kill(proc.pid, signal.SIGTERM)
            code = proc.wait(timeout=180)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    return _read(code, report, log, err.read_text(), tag)


def _read(code: int, report, log, stderr: str, tag: str) -> Launch:
    left = _left(tag)
    for pid in left:  # never leave them to the next test
        _kill(int(pid.split()[0]))
    summary = json.loads(report.read_text())["summary"] if report.exists() else None
    lines = log.read_text().splitlines() if log.exists() else []
    findings = [line for line in lines if line.startswith('{"findings"')]
    return Launch(code, summary, len(lines) - len(findings), stderr, left, findings)


def _wait_for_steps(log, steps, proc, limit_s=120.0):
    end = time.monotonic() + limit_s
    while time.monotonic() < end and proc.poll() is None:
        if log.exists() and len(log.read_text().splitlines()) > steps:  # a header line first
            return
        time.sleep(0.1)
    raise AssertionError(f"rank 0 logged no {steps} steps")


def _left(tag: str) -> list[str]:
    """`PID COMMAND` of the processes whose command line holds `tag`, after a grace."""
    end = time.monotonic() + LEFT_WAIT_S
    while True:
        out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout
        found = [ln.strip() for ln in out.splitlines() if tag in ln and "ps -eo" not in ln]
        if not found or time.monotonic() > end:
            return found
        time.sleep(0.2)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def died_note(run: Launch) -> str:
    notes = [n for n in run.notes if n.startswith("rank 1 died: ")]
    assert len(notes) == 1, run.notes
    return notes[0]


# runs that share one launch ----------------------------------------------------------


HANG = ("--hang-timeout", str(HANG_TIMEOUT_S))
SHARED_RUNS = {  # name: (gradscope's arguments, the script's)
    # no DDP; rank 1 calls sys.exit(3) after step 3: it hands its failure over to rank 0
    # as a rank that raises does (`raised_without_ddp`, under torchrun's watch)
    "exited_without_ddp": ((), ("--wrapper", "none", "--fail", "exit")),
    # no DDP: rank 1 waits in a recv rank 0 never sends, rank 0 in its next all_reduce
    "hung_without_ddp": (HANG, ("--wrapper", "none", "--fail", "hang")),
    # no DDP; rank 0 runs a child that computes for twice the hang timeout and more,
    # rank 1 waits in a barrier meanwhile: a healthy run, its code is rank 0's verdict
    "busy_child": (
        HANG,
        ("--wrapper", "none", "--child", "busy", "--child-s", str(2 * HANG_TIMEOUT_S + 1)),
    ),
    # rank 0 runs a child that sleeps far longer than the hang timeout (no CPU, no I/O)
    "sleeping_child": (HANG, ("--child", "sleep", "--child-s", "60")),
}
EXTRA_COLLECTIVE = ["watch", hang_lines.SCRIPT, *HANG, "--", "--bug", "extra-collective"]
"""DDP; rank 1 issues an all_reduce rank 0 never issues (as `torchrun -m gradscope`)."""
LIGHTNING_STOP = os.path.join(ROOT, "tests", "integrations", "scripts", "lightning_ddp_stop.py")
"""A Lightning DDP fit whose callback stops on an error only rank 1 sees (when installed)."""
HAS_LIGHTNING = importlib.util.find_spec("lightning") is not None
HANG_BOUND_S = 30.0
"""Three steps, the hang timeout and the block: far below gloo's 30 min."""


TAGS = {name: "gs" + uuid.uuid4().hex[:12] for name in SHARED_RUNS}
"""Each shared run's word in its processes' command lines (`--tag`)."""


def _shared_plan(tmp) -> dict[str, list[str]]:
    plan = {
        name: [
            *("watch", SCRIPT, "-f", "json", "-o", str(tmp / f"{name}.json")),
            *("--log", str(tmp / f"{name}.jsonl"), *watch_args),
            *("--", "--tag", TAGS[name], *args),
        ]
        for name, (watch_args, args) in SHARED_RUNS.items()
    }
    plan["extra_collective"] = EXTRA_COLLECTIVE
    if HAS_LIGHTNING:
        (tmp / "lightning").mkdir()
        plan["lightning_stop"] = [LIGHTNING_STOP, str(tmp / "lightning")]
    return plan


shared_launch.share("stop", _shared_plan, scripts=frozenset({"lightning_stop"}))


@pytest.fixture(scope="module")
def shared_runs(tmp_path_factory):
    """`gradscope watch SCRIPT` on 2 ranks for each of SHARED_RUNS, in the shared launch
    (with test_dist_watch.py's runs where it runs too): {name: Launch} (`code`: rank 0's;
    `left`: what its script started); beside them the extra collective's
    shared_launch.Scenario and the Lightning stop's with its folder."""
    tmp, found, launch = shared_launch.shared("stop", tmp_path_factory)
    runs: dict = {}
    for name, run in found.items():
        assert run is not None, launch.stderr[-3000:]
        report, log = tmp / f"{name}.json", tmp / f"{name}.jsonl"
        runs[name] = (
            _read(run.codes[0], report, log, run.stderr, TAGS[name]) if name in SHARED_RUNS else run
        )
    if "lightning_stop" in runs:  # its ranks' files beside what the scenario left
        runs["lightning_stop"] = (runs["lightning_stop"], tmp / "lightning")
    return runs


# a rank fails --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def killed_while_rank0_computes(tmp_path_factory):
    """DDP; rank 1 is SIGKILLed after step 3 while rank 0 sleeps: torchrun SIGTERMs
    rank 0 in the middle of its script."""
    return launch(tmp_path_factory.mktemp("kill"), "--fail", "kill", "--pause", "3")


def test_a_rank_killed_by_sigkill_makes_rank_0_report_the_steps_so_far_and_exit_2(
    killed_while_rank0_computes,
):
    run = killed_while_rank0_computes
    assert run.code == 2, (run.code, run.stderr[-3000:])  # a rank failed, not "findings"
    assert run.summary is not None, run.stderr[-3000:]
    assert run.summary["status"] == "crashed" and run.summary["partial"] is True
    assert run.summary["steps"] == 3 and run.log_lines == 4  # the log is level with it
    assert run.summary["error"].startswith("the script died on rank 1: it ended without a ")
    assert "SIGKILL" in died_note(run)
    assert any(n.startswith("torchrun stopped rank 0 (SIGTERM) after rank 1") for n in run.notes)
    assert run.left == []


@pytest.fixture(scope="module")
def killed_in_a_collective(tmp_path_factory):
    """DDP; rank 1 is SIGKILLed after step 3 while rank 0 goes on into its next
    all-reduce: rank 0's collective breaks, then torchrun's SIGTERM comes."""
    return launch(tmp_path_factory.mktemp("kill2"), "--fail", "kill")


def test_a_rank_killed_while_rank_0_waits_for_it_is_named_in_the_report(killed_in_a_collective):
    run = killed_in_a_collective
    assert run.code == 2, (run.code, run.stderr[-3000:])
    assert run.summary is not None, run.stderr[-3000:]
    assert run.summary["status"] == "crashed" and run.summary["steps"] == 3
    assert "killed by a signal" in died_note(run)
    assert run.log_lines == 4 and run.left == []


@pytest.fixture(scope="module")
def raised_without_ddp(tmp_path_factory):
    """No DDP (each rank all-reduces its own gradients); rank 1 raises after step 3."""
    return launch(tmp_path_factory.mktemp("raise"), "--wrapper", "none", "--fail", "raise")


def test_a_rank_that_raises_in_a_run_without_ddp_is_named_with_its_error(raised_without_ddp):
    run = raised_without_ddp
    assert run.code == 2, (run.code, run.stderr[-3000:])
    assert run.summary is not None and run.summary["status"] == "crashed"
    note = died_note(run)
    assert "rank_fail_train.py:" in note
    assert note.endswith("the script raised RuntimeError: rank 1 lost its data shard")
    assert run.log_lines == 4 and run.left == []


@pytest.fixture
def exited_without_ddp(shared_runs):
    return shared_runs["exited_without_ddp"]


def test_a_rank_that_calls_sys_exit_3_is_named_and_the_launch_exits_2(exited_without_ddp):
    run = exited_without_ddp
    assert run.code == 2, (run.code, run.stderr[-3000:])
    assert run.summary is not None and run.summary["status"] == "crashed"
    assert died_note(run).endswith("the script called sys.exit(3)")
    assert run.log_lines == 4 and run.left == []


@pytest.mark.skipif(not HAS_LIGHTNING, reason="lightning is not installed")
def test_one_ranks_error_stops_every_lightning_rank_at_the_same_step(shared_runs):
    """The Lightning callback's opt-in stop under DDP, reduced across the ranks as
    EarlyStopping's decision is: an error only rank 1 sees stops both ranks at the same
    step, and the report says stopped (scripts/lightning_ddp_stop.py in integrations/).
    Only the launch's ranks import lightning: this process never needs it."""
    run, folder = shared_runs["lightning_stop"]
    assert run.returncode == 0, run.stderr[-3000:]  # a rank stopped alone: a timeout
    rank0, rank1 = (json.loads((folder / f"rank{r}.json").read_text()) for r in (0, 1))
    assert rank0["said"] == [] and "GS401" in rank1["said"]  # only rank 1 judged it
    assert rank0["step"] == rank1["step"] < 40  # stopped, both at the same step
    assert rank0["step"] == 8  # the NaN came at step 6, read back and reduced at step 8
    assert rank0["status"] == rank1["status"] == "stopped"
    doc = json.loads((folder / "report.json").read_text())
    assert doc["summary"]["status"] == "stopped"
    assert doc["summary"]["steps"] == rank0["step"]
    assert "GS401" in {f["rule"] for f in doc["findings"]}
    assert "stopping the run on another rank's error" in run.stdout + run.stderr


# the launch is stopped from outside ------------------------------------------------------


@pytest.fixture(scope="module")
def stopped_like_timeout(tmp_path_factory):
    return launch(tmp_path_factory.mktemp("term"), "--steps", "400", "--pause", "0.3", stop="group")


@pytest.fixture(scope="module")
def stopped_through_the_launcher(tmp_path_factory):
    return launch(
        tmp_path_factory.mktemp("term1"), "--steps", "400", "--pause", "0.3", stop="launcher"
    )


@pytest.mark.parametrize("case", ["stopped_like_timeout", "stopped_through_the_launcher"])
def test_sigterm_from_outside_exits_143_with_the_report_of_the_steps_so_far(request, case):
    run = request.getfixturevalue(case)
    assert run.code == 143, (run.code, run.stderr[-3000:])
    assert run.summary is not None, run.stderr[-3000:]
    assert run.summary["status"] == "terminated" and run.summary["partial"] is True
    assert 4 <= run.summary["steps"] < 400
    assert run.log_lines == run.summary["steps"] + 1  # flushed, level with the report
    assert len(run.log_findings) == 1  # judged, and its findings logged last
    assert not [n for n in run.notes if " died: " in n]  # every rank was stopped: no culprit
    assert run.left == []


# hangs: the steps a rank took; a rank waiting on its own child (healthy: exit 0) ---------


@pytest.fixture
def hung_without_ddp(shared_runs):
    return shared_runs["hung_without_ddp"]


def test_the_hang_block_counts_the_steps_each_rank_took_without_ddp(hung_without_ddp):
    run = hung_without_ddp
    assert run.code == 2, (run.code, run.stderr[-3000:])
    block = run.hang_block()
    assert block[0] == f"gradscope: the run is stuck: no rank made progress for {HANG_TIMEOUT_S} s"
    rank0 = next(ln for ln in block if ln.startswith("gradscope:   rank 0: "))
    rank1 = next(ln for ln in block if ln.startswith("gradscope:   rank 1: "))
    assert rank0.startswith("gradscope:   rank 0: 3 optimizer steps, waiting in all_reduce at ")
    assert rank1.startswith("gradscope:   rank 1: 3 optimizer steps, waiting in recv at ")
    assert run.left == []


def test_a_collective_only_one_rank_issues_stops_the_run_naming_both_ranks(shared_runs):
    run = shared_runs["extra_collective"]  # a shared_launch.Scenario: both ranks' stderr
    err = run.stderr
    assert run.returncode != 0 and run.wall < HANG_BOUND_S, (run.wall, err[-3000:])
    lines = hang_lines.gradscope_lines(err)
    assert lines[0] == f"gradscope: the run is stuck: no rank made progress for {HANG_TIMEOUT_S} s"
    assert err.count("the run is stuck") == 1  # one block, from rank 0
    forward = hang_lines.line_of("mse_loss(model(x), y)")
    collective = hang_lines.line_of("dist.all_reduce(torch.ones(1))")
    rank0 = next(ln for ln in lines if "  rank 0: " in ln)
    rank1 = next(ln for ln in lines if "  rank 1: " in ln)
    assert "rank 0: 3 optimizer steps, waiting in DistributedDataParallel.forward at " in rank0
    assert rank0.endswith(forward), rank0
    assert "rank 1: 3 optimizer steps, waiting in all_reduce at " in rank1
    assert rank1.endswith(collective), rank1
    assert any("different places" in ln for ln in lines)
    assert lines[-1] == "gradscope: stopping every rank (exit 2); set the limit with --hang-timeout"
    assert "done, loss" not in err  # the script never finished
    hang_lines.assert_no_rank_traceback(err)


@pytest.fixture
def busy_child(shared_runs):
    return shared_runs["busy_child"]


def test_a_rank_waiting_on_a_working_child_process_is_never_a_hang(busy_child):
    run = busy_child
    assert run.code == 0, (run.code, run.stderr[-3000:])
    assert not run.hang_block()
    assert run.summary is not None and run.summary["status"] == "completed"
    assert run.summary["steps"] == 6 and run.log_lines == 7 and run.left == []


@pytest.fixture
def sleeping_child(shared_runs):
    return shared_runs["sleeping_child"]


def test_a_child_that_sleeps_past_the_timeout_is_named_and_ended_with_the_run(sleeping_child):
    run = sleeping_child
    assert run.code == 2, (run.code, run.stderr[-3000:])
    block = run.hang_block()
    rank0 = next(ln for ln in block if ln.startswith("gradscope:   rank 0: "))
    assert "3 optimizer steps, waiting for its child process " in rank0
    assert "time.sleep(60.0)" in rank0 and " in run at " in rank0  # its command, the call
    assert any(
        ln.startswith("gradscope: rank 0 waits for a child process of its own, not in a ")
        for ln in block
    ), block
    assert not any("never completes" in ln for ln in block)
    assert run.left == []  # the sleeping child went with the run
