"""Real reports for every terminal renderer, each naming `name` wherever the user's text
goes: a module, a target, an error message, a note. Built by the real inspect, watch,
gradcheck and diff on tiny models (then, where no real run can produce it, a field such
as the script's error replaced), so the text and width tests see what users see."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import torch
from torch import nn

import gradscope
from gradscope.diff import diff
from gradscope.examples import functions
from gradscope.findings import Severity
from gradscope.gradcheck.checker import check
from gradscope.gradcheck.results import GradcheckReport, Note
from gradscope.outcome import CheckReport, Outcome
from gradscope.report import diff_terminal, gradcheck_terminal, terminal, watch_terminal
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


Renderer = Callable[[str, View], str]
RENDERERS: dict[str, Renderer] = {
    "inspect": lambda name, view: terminal.render(inspect_report(name), view),
    "check": lambda name, view: terminal.render_check(check_report(name), view),
    "watch": lambda name, view: watch_terminal.render(watch_report(name), view),
    "gradcheck": lambda name, view: gradcheck_terminal.render(gradcheck_report(name), view),
    "diff": lambda name, view: diff_terminal.render(diff_result(name), view),
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
}
"""Where each report quotes `name`: the sentences it must appear in, whole."""
