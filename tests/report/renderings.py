"""Real reports for every terminal renderer, each naming `name` wherever the user's text
goes: a module, a target, an error message, a note. Built by the real inspect, watch,
gradcheck and diff on tiny models, and the diff of two runs on hand-made `watch --log`
files (then, where no real run can produce it, a field such as the script's error or a
log's path replaced), so the text and width tests see what users see."""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import math
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

import gradscope
from gradscope.config import Settings
from gradscope.diff import diff
from gradscope.diff.runs import diff_logs
from gradscope.diff.runs import findings as runs_findings
from gradscope.diff.runs.result import RunsDiff
from gradscope.examples import functions
from gradscope.findings import Severity
from gradscope.gradcheck.checker import check
from gradscope.gradcheck.results import GradcheckReport, Note
from gradscope.outcome import CheckReport, Outcome
from gradscope.report import (
    diff_runs_terminal,
    diff_terminal,
    gradcheck_terminal,
    terminal,
    watch_terminal,
)
from gradscope.report.console import View


def error_of(name: str) -> str:
    """An error message as a user's script raises it, quoting `name`."""
    return f"ValueError: expected {name} got [4, 3]"


class Net(nn.Module):
    """A body and a module called `name` that forward never calls (GS101, GS411)."""

    def __init__(self, name: str, scale: float = 1.0) -> None:
        super().__init__()
        self.body = nn.Linear(3, 2)
        self.add_module(name, nn.Linear(3, 2))
        self.scale = scale
        self.unused = name

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


class Chain(nn.Module):
    """Three layers in a row, the middle one called `name`: the diff's subject."""

    def __init__(self, name: str, scale: float = 1.0) -> None:
        super().__init__()
        self.first = nn.Linear(3, 3)
        self.add_module(name, Scaled(scale))
        self.last = nn.Linear(3, 1)
        self.middle = name

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.last(getattr(self, self.middle)(self.first(x)))


class Scaled(nn.Linear):
    def __init__(self, scale: float) -> None:
        super().__init__(3, 3)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) * self.scale


@functools.cache
def inspect_report(name: str) -> gradscope.Report:
    torch.manual_seed(0)
    return gradscope.inspect(Net(name), torch.randn(4, 3), label=f"build {name}")


@functools.cache
def check_report(name: str) -> CheckReport:
    report = inspect_report(name).outcome()
    broken = Outcome("inspect", f"models/{name}.py:build", could_not_run=error_of(name))
    return CheckReport([report, broken], Severity.ERROR)


@functools.cache
def watch_report(name: str) -> gradscope.WatchReport:
    torch.manual_seed(0)
    model = Net(name)
    opt = torch.optim.SGD(model.body.parameters(), lr=0.1)
    with gradscope.watch() as w:
        for _ in range(4):
            loss = (model(torch.randn(8, 3)) + getattr(model, name)(torch.randn(8, 3))).pow(2)
            opt.zero_grad()
            loss.mean().backward()
            opt.step()
    run = dataclasses.replace(
        w.run,
        label=f"script {name}.py",
        status="crashed",
        error=error_of(name),
        notes=(f"rank 1 saw no gradient for {name} at step 3, so its norm is rank 0's alone",),
    )
    return dataclasses.replace(w.report, run=run, where=f"{name}.py:7")


@functools.cache
def gradcheck_report(name: str) -> GradcheckReport:
    wrong = check(functions.ScaleIgnoresGradOutput, label=name)
    (failure,) = wrong.failures
    wrong = dataclasses.replace(
        wrong,
        failures=(dataclasses.replace(failure, output=name),),
        notes=(Note("inplace-saved", f"forward modified {name} in place"),),
    )
    raises = check(functions.BackwardRaises, label=f"{name}:BackwardRaises")
    (error,) = raises.errors
    raises = dataclasses.replace(
        raises, errors=(dataclasses.replace(error, message=error_of(name)),)
    )
    passes = check(functions.CustomReLU, label=f"{name}:CustomReLU")
    return GradcheckReport((wrong, raises, passes), torch.__version__)


@functools.cache
def diff_result(name: str) -> gradscope.DiffResult:
    torch.manual_seed(0)
    ref, new = Chain(name), Chain(name, scale=2.0)
    return diff(ref, new, torch.randn(4, 3), ref_label=f"ref {name}", new_label=f"port {name}")


def _runs_logs():
    """tests/diff/runs_logs.py, the one writer of hand-made logs in the real format."""
    path = Path(__file__).resolve().parents[1] / "diff" / "runs_logs.py"
    spec = importlib.util.spec_from_file_location("report_runs_logs", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def runs_diff(name: str) -> RunsDiff:
    """Two runs whose parameter `name`.weight parts first (GS607), the new one at learning
    rate 0 (GS608) and shorter (GS609, ignored by the config), with an unreadable line.
    No file system takes every name (NUL, a lone surrogate, "/", 300 characters), so the
    logs are written under plain names and their paths replaced by labels naming `name`,
    the findings then made again from the result, as the diff makes them."""
    logs = _runs_logs()
    names = [logs.NAMES[0], f"{name}.weight", *logs.NAMES[2:]]

    def parts(step: int, norms: list[float], loss: float) -> tuple[list[float], float]:
        if step >= 9:
            norms = list(norms)
            norms[1] *= 1 + 0.01 * 2 ** min(step - 9, 8)
        return norms, loss

    labels = (f"ref {name}.jsonl", f"new {name}.jsonl")
    with tempfile.TemporaryDirectory() as folder:
        ref = logs.write(Path(folder, "ref.jsonl"), range(1, 101), names=names)
        new = logs.write(Path(folder, "new.jsonl"), range(1, 61), names=names, change=parts, lr=0)
        lines = new.read_text().splitlines()
        new.write_text("\n".join([*lines[:11], "{not json", *lines[11:]]) + "\n")
        result = diff_logs(str(ref), str(new))
    notes = [n.replace("new.jsonl", labels[1]) for n in result.notes]
    result = dataclasses.replace(result, ref_label=labels[0], new_label=labels[1], notes=notes)
    assert result.first is not None and not math.isinf(result.first.gaps[0].rel)
    settings = Settings(ignores=(("runs-misaligned", "*"),))
    result.findings = settings.judged(runs_findings.of(result))
    result.outcome()
    return result


Renderer = Callable[[str, View], str]
RENDERERS: dict[str, Renderer] = {
    "inspect": lambda name, view: terminal.render(inspect_report(name), view),
    "check": lambda name, view: terminal.render_check(check_report(name), view),
    "watch": lambda name, view: watch_terminal.render(watch_report(name), view),
    "gradcheck": lambda name, view: gradcheck_terminal.render(gradcheck_report(name), view),
    "diff": lambda name, view: diff_terminal.render(diff_result(name), view),
    "runs": lambda name, view: diff_runs_terminal.render(runs_diff(name), view),
}
"""Every terminal renderer, on a report that names `name`."""

SAID: dict[str, Callable[[str], list[str]]] = {
    "inspect": lambda n: [f"inspect · build {n}", f"grad of {n}.weight is None"],
    "check": lambda n: [f"grad of {n}.weight is None", f"models/{n}.py:build", error_of(n)],
    "watch": lambda n: [
        f"watch · script {n}.py",
        f"{n}.py:7: the script raised {error_of(n)}",
        f"{n}.weight requires grad",
        f"rank 1 saw no gradient for {n} at step 3",
    ],
    "gradcheck": lambda n: [
        f"FAIL {n} (",
        f"d {n}[",
        f"forward modified {n} in place",
        error_of(n),
        f"failed: {n}, {n}:BackwardRaises",
    ],
    "diff": lambda n: [f"diff · ref {n} vs port {n}", f"the difference starts at {n} (Scaled"],
    "runs": lambda n: [
        f"diff · ref {n}.jsonl vs new {n}.jsonl",
        f"notes new {n}.jsonl: 1 unreadable line(s) skipped (12)",
        f"the runs part at step 9: 1 parameter(s), first {n}.weight; {n}.weight",
        "new NO the weights never moved (update norm 0 at all 3 sampled steps) · new",
        "1 ignored (runs-misaligned:* x1) by the config",
    ],
}
"""Where each report quotes `name`: the sentences it must appear in, whole."""
