"""Scripts whose threads call backward and step: every step recorded with its own loss
and backward calls, no thread broken, no finding on a healthy run.

Each script records, as it runs, the loss and backward calls of each of its steps and
the optimizer that made it (the oracle, written to argv[1]); the report must hold the
same steps, optimizer by optimizer.
"""

from __future__ import annotations

import collections
import json
import os
import threading

import pytest
import torch
from torch import nn
from watch_scripts import gradscope, script

import gradscope as gs
from gradscope.watcher import watch_script


def by_optimizer(run) -> dict[str, list[tuple[float | None, int]]]:
    out = collections.defaultdict(list)
    for s in run.steps:
        out[run.optimizers[s.optimizer]].append((s.loss, s.backward_calls))
    return out


def agree(run, oracle: dict) -> None:
    """Same steps per optimizer; the order within one optimizer is the order its thread
    made them in, and the losses and backward calls are the script's own."""
    want = collections.defaultdict(list)
    for o in oracle["steps"]:
        want[o["optimizer"]].append((o["loss"], o["calls"]))
    got = by_optimizer(run)
    assert sorted(got) == sorted(want)
    for name, steps in want.items():
        assert [c for _, c in got[name]] == [c for _, c in steps], name
        assert [v for v, _ in got[name]] == pytest.approx([v for v, _ in steps], rel=1e-6)
    assert [s.step for s in run.steps] == list(range(1, len(run.steps) + 1))


def watched(tmp_path, name: str, *argv: str, **options):
    out = tmp_path / "oracle.json"
    report = watch_script(script(name), [str(out), *argv], **options)
    return report, json.loads(out.read_text())


@pytest.mark.parametrize(
    ("name", "argv"),
    [
        ("threads_train_eval.py", ["60"]),  # a training thread, the main thread evaluating
        ("threads_two_models.py", ["60"]),  # two threads, each its own model and optimizer
        ("threads_two_models.py", ["60", "zero-first"]),  # each zeroes before its forward
        ("threads_pool_shards.py", ["20"]),  # a pool runs the shards' backward, main steps
    ],
)
def test_every_step_of_every_thread_is_recorded_as_the_script_saw_it(tmp_path, name, argv):
    report, oracle = watched(tmp_path, name, *argv)
    assert report.run.status == "completed", report.run.error
    agree(report.run, oracle)
    assert not report.findings, [f.message for f in report.findings]
    assert not report.run.notes


def test_two_threads_training_repeatedly_never_mix_their_steps(tmp_path):
    for _ in range(3):
        report, oracle = watched(tmp_path, "threads_two_models.py", "80")
        assert report.run.status == "completed", report.run.error
        agree(report.run, oracle)
        assert not report.findings, [f.message for f in report.findings]


def test_each_threads_optimizer_is_labelled_with_its_own_model(tmp_path):
    report, _ = watched(tmp_path, "threads_two_models.py", "10")
    run = report.run
    assert sorted(run.optimizers) == ["Adam", "SGD"]
    first, second = (set(run.members_of(i)) for i in range(2))
    assert first and second and not first & second
    labels = {run.optimizer_label(i) for i in range(2)}
    assert len(labels) == 2
    assert all(
        kind in label
        for kind, label in zip(run.optimizers, map(run.optimizer_label, (0, 1)), strict=True)
    )


def test_a_step_reads_no_gradient_of_a_parameter_another_thread_steps(tmp_path):
    """Reading p.grad while another thread's zero_grad frees it crashes torch: a thread's
    step measures its own optimizer's parameters (and none that another thread steps)."""
    report, _ = watched(tmp_path, "threads_two_models.py", "30")
    run = report.run
    members = [set(run.members_of(i)) for i in range(len(run.optimizers))]
    first: dict[int, int] = {}
    for s in run.steps:
        first.setdefault(s.optimizer, s.step)
    # once both threads have stepped (a step numbered just after the other thread's first
    # may have begun before it, while its parameters were nobody else's yet)
    later = [s for s in run.steps if s.step > max(first.values()) + 1]
    assert len(later) > 30  # of 60: both threads stepping for most of the run
    for s in later:
        others = set().union(*(m for i, m in enumerate(members) if i != s.optimizer))
        assert all(s.param_norms[i] is None for i in others), s.step
        assert all(s.param_norms[i] is not None for i in members[s.optimizer]), s.step


class PausedBackward:
    """A backward paused half-way in one thread (a tensor hook waits), and the reads of
    its model's `.grad` from any other thread meanwhile: autograd writes gradients
    without the GIL, and a read racing that write can crash the process."""

    def __init__(self, model: nn.Module) -> None:
        self.ids = {id(p) for p in model.parameters()}
        self.paused, self.resume = threading.Event(), threading.Event()
        self.thread: int | None = None
        self.raced: list[str] = []

    def hook(self, g: torch.Tensor) -> torch.Tensor:
        self.thread = threading.get_ident()
        self.paused.set()
        assert self.resume.wait(10)
        self.resume.clear()
        self.thread = None
        return g

    def read(self, t: torch.Tensor) -> None:
        if self.thread not in (None, threading.get_ident()) and id(t) in self.ids:
            self.raced.append(threading.current_thread().name)

    def meanwhile(self, work) -> None:
        """Run `work` in this thread while the other thread's backward is paused."""
        assert self.paused.wait(10)
        self.paused.clear()
        work()
        self.resume.set()


@pytest.fixture
def paused_backward(monkeypatch):
    read = torch._C.TensorBase.grad
    made: list[PausedBackward] = []

    def grad(t):
        for paused in made:
            paused.read(t)
        return read.__get__(t)

    monkeypatch.setattr(torch.Tensor, "grad", property(grad, read.__set__, read.__delete__))
    return lambda model: made.append(PausedBackward(model)) or made[-1]


def test_no_gradient_is_read_while_another_thread_runs_the_same_models_backward(
    paused_backward,
):
    """Before any step (the search for updates by hand reads every tracked gradient), a
    pool's two threads run the backward of one model's shards (threads_pool_shards.py)."""
    model = nn.Linear(4, 4)
    paused = paused_backward(model)

    def shard():
        h = model(torch.randn(8, 4))
        h.register_hook(paused.hook)
        h.pow(2).mean().backward()

    def backward_twice():  # a backward's end, then a later backward's start and end
        for _ in range(2):
            model(torch.randn(8, 4)).pow(2).mean().backward()

    with gs.watch() as w:
        model(torch.randn(8, 4)).pow(2).mean().backward()
        helper = threading.Thread(target=shard)
        helper.start()
        paused.meanwhile(backward_twice)
        helper.join()
    assert paused.raced == []
    assert any("not looked for" in note for note in w.report.run.notes)


def test_no_gradient_is_read_while_another_thread_runs_its_first_backward(paused_backward):
    """Two threads, each training its own model: while one is in its first backward (its
    optimizer has not stepped: nothing yet says its parameters are another thread's), the
    other clips and steps."""
    model_a, model_b = nn.Linear(4, 4), nn.Linear(4, 4)
    opt_a = torch.optim.Adam(model_a.parameters())
    opt_b = torch.optim.Adam(model_b.parameters())
    paused = paused_backward(model_b)

    def step_a():
        opt_a.zero_grad()
        model_a(torch.randn(8, 4)).pow(2).mean().backward()
        nn.utils.clip_grad_norm_(model_a.parameters(), 1.0)
        opt_a.step()

    def train_b():
        for _ in range(2):
            opt_b.zero_grad()
            h = model_b(torch.randn(8, 4))
            h.register_hook(paused.hook)
            h.pow(2).mean().backward()
            opt_b.step()

    with gs.watch() as w:
        step_a()
        helper = threading.Thread(target=train_b)
        helper.start()
        for _ in range(2):
            paused.meanwhile(lambda: [step_a() for _ in range(2)])
        helper.join()
    assert paused.raced == []
    assert len(w.report.run.steps) == 7
    assert w.report.findings == []


def test_no_gradient_is_read_at_an_optimizers_first_step_while_another_thread_accumulates(
    paused_backward,
):
    """An optimizer's first step looks at every model's parameters without a gradient
    (frozen by a no_grad block?) while the other thread is in its second micro-batch."""
    model_a, model_b = nn.Linear(4, 4), nn.Linear(4, 4)
    opt_a = torch.optim.Adam(model_a.parameters())
    opt_b = torch.optim.Adam(model_b.parameters())
    paused = paused_backward(model_a)

    def train_a():
        opt_a.zero_grad()
        model_a(torch.randn(8, 4)).pow(2).mean().backward()
        h = model_a(torch.randn(8, 4))
        h.register_hook(paused.hook)
        h.pow(2).mean().backward()
        opt_a.step()

    def step_b():
        opt_b.zero_grad()
        model_b(torch.randn(8, 4)).pow(2).mean().backward()
        opt_b.step()

    with gs.watch() as w:
        helper = threading.Thread(target=train_a)
        helper.start()
        paused.meanwhile(step_b)
        helper.join()
    assert paused.raced == []
    assert len(w.report.run.steps) == 2


def test_the_pools_backward_calls_belong_to_the_main_threads_step(tmp_path):
    report, oracle = watched(tmp_path, "threads_pool_shards.py", "10")
    assert [s.backward_calls for s in report.run.steps] == [4] * 10
    agree(report.run, oracle)


def test_a_helper_threads_backward_that_reaches_other_parameters_is_not_counted():
    """A thread that only runs backward on a model no optimizer steps (a probe): the
    main thread's steps keep their own loss and backward calls."""
    torch.manual_seed(0)
    model, probe = nn.Linear(4, 1), nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    with gs.watch() as w:
        for _ in range(5):
            helper = threading.Thread(
                target=lambda: probe(torch.randn(8, 4)).pow(2).mean().backward()
            )
            helper.start()
            helper.join()
            opt.zero_grad()
            loss = model(torch.randn(8, 4)).pow(2).mean()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    steps = w.report.run.steps
    assert [s.backward_calls for s in steps] == [1] * 5
    assert [s.loss for s in steps] == pytest.approx(losses, rel=1e-6)
    assert w.report.run.backward_calls == 10


def test_steps_reached_in_a_thread_stop_the_recording_and_never_kill_it(tmp_path):
    """--steps 7 reached in the training thread: 7 steps recorded, the thread runs to its
    end (the script writes its oracle after joining it), the run is 'stopped'."""
    report, oracle = watched(tmp_path, "threads_train_eval.py", "40", steps=7)
    assert len(oracle["steps"]) == 40
    assert report.run.status == "stopped"
    assert [s.step for s in report.run.steps] == list(range(1, 8))
    assert [s.loss for s in report.run.steps] == pytest.approx(
        [o["loss"] for o in oracle["steps"][:7]], rel=1e-6
    )
    assert any("--steps 7" in note and "trainer" in note for note in report.run.notes)


def test_a_failure_of_gradscopes_own_in_a_thread_is_a_note_not_an_exception(monkeypatch):
    from gradscope.watcher.measure import Measure

    def broken(self, skip=frozenset()):
        raise RuntimeError("measurement broke")

    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    errors: list[BaseException] = []

    def train() -> None:
        try:
            for _ in range(3):
                opt.zero_grad()
                model(torch.randn(4, 3)).sum().backward()
                opt.step()
        except BaseException as exc:  # the test fails on any
            errors.append(exc)

    with gs.watch() as w:
        monkeypatch.setattr(Measure, "grads", broken)
        worker = threading.Thread(target=train)
        worker.start()
        worker.join()
    assert errors == []
    assert any("measurement broke" in note for note in w.report.run.notes)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "launched"),
    [
        ("threads_train_eval.py", False),
        ("threads_two_models.py", False),
        ("threads_pool_shards.py", False),
        ("threads_dataloader.py", True),
    ],
)
def test_the_cli_watches_threaded_scripts(tmp_path, monkeypatch, name, launched):
    """`gradscope watch -f json`: exit 0 (no crash, no false finding), every step of the
    script's own record in the JSON. The script whose DataLoader starts worker processes
    runs in an interpreter of its own (its exit with them); the others run the same command
    in this process (an interpreter start each bought nothing the in-process runs above do
    not check; the repeated runs that look for races are those too)."""
    out = tmp_path / "oracle.json"
    if launched:
        done = gradscope("watch", script(name), "-f", "json", "--", str(out))
        code, stdout, stderr = done.returncode, done.stdout, done.stderr
    else:
        from typer.testing import CliRunner

        from gradscope.cli.root import app

        monkeypatch.chdir(os.path.dirname(script(name)))
        result = CliRunner().invoke(
            app, ["watch", script(name), "-f", "json", "--", str(out)], env={"COLUMNS": "80"}
        )
        code, stdout, stderr = result.exit_code, result.stdout, result.stderr
    assert code == 0, stderr[-2000:]
    assert "Traceback" not in stderr
    report = json.loads(stdout)
    oracle = json.loads(out.read_text())
    assert report["findings"] == []
    assert report["summary"]["steps"] == len(oracle["steps"])
    names = report["summary"]["optimizers"]
    got = sorted(
        (names[s["optimizer"]], s["backward_calls"], round(s["loss"], 5)) for s in report["steps"]
    )
    want = sorted((o["optimizer"], o["calls"], round(o["loss"], 5)) for o in oracle["steps"])
    assert got == want
