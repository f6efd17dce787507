"""The checks of one gradcheck target: each check's two stages (stages.py), the failing
pairs' blocks compared and diagnosed, and the warm-ups paid before any clock starts.
checker.py builds the problem and runs these in order."""

from __future__ import annotations

import functools
import time
import warnings
from dataclasses import replace
from typing import Any

from gradscope.gradcheck import made_up
from gradscope.gradcheck.inputs import Problem
from gradscope.gradcheck.results import (
    SURROGATE,
    CheckError,
    CheckSummary,
    Diagnosis,
    InputInfo,
    Note,
    PairFailure,
)

# torch, and the modules here that load it, are imported in functions: `gradscope --help`
# must not load them


@functools.cache
def warm_up() -> None:
    """One tiny backward before any clock starts: torch imports parts of itself (sympy,
    about half a second) on the first autograd.grad call given grad_outputs, as every
    check's are, which would otherwise be billed to whichever target is checked first."""
    import torch

    x = torch.ones(2, dtype=torch.float64, requires_grad=True)
    torch.autograd.grad(x * x, x, torch.ones_like(x))


@functools.cache
def warm_up_forward_ad() -> None:
    """One tiny forward-mode pass, paid only by a run that checks forward-ad: the first
    dual tensor imports torch._dynamo (about a second of CPU), which a backward-only
    check never needs."""
    import torch
    import torch.autograd.forward_ad as fwAD

    x = torch.ones(2, dtype=torch.float64)
    with fwAD.dual_level():
        fwAD.unpack_dual(fwAD.make_dual(x, torch.ones_like(x)) * 2)


class TargetChecks:
    """The checks of one target, sharing numerical columns between backward and forward-ad."""

    def __init__(self, problem: Problem, tol: Any, gen: Any, explain: bool = True):
        self.problem, self.tol, self.gen, self.explain = problem, tol, gen, explain
        self.summaries: list[CheckSummary] = []
        self.failures: list[PairFailure] = []
        self.errors: list[CheckError] = []
        self.notes: list[Note] = []
        self.infos: list[InputInfo] = []
        self._stage: Any = None

    def check(self, name: str) -> None:
        from gradscope.gradcheck.jacobian import Evaluator, StageError
        from gradscope.gradcheck.notes import error
        from gradscope.gradcheck.stages import second_order

        if name == "forward-ad":
            warm_up_forward_ad()  # before the clock, as warm_up for the backward
        start, ev = time.perf_counter(), None
        failures: list[PairFailure] = []
        try:
            problem = (
                second_order(self.problem, self.gen) if name == "second-order" else self.problem
            )
            if problem is None:
                self.notes.append(
                    Note(
                        "no-second-order",
                        "no output requires grad, so there is no second-order gradient to check",
                    )
                )
                return
            ev = Evaluator(problem.fn, problem.inputs, self.tol, problem.leaves)
            with warnings.catch_warnings():  # the probe reported them; thousands of calls follow
                warnings.simplefilter("ignore")
                failures = self._stages(name, problem, ev)
        except StageError as exc:
            self.errors.append(error(name, exc, self.problem))
        if ev is not None and ev.grad_output_modified and name == "backward":
            self.notes.append(
                Note(
                    "inplace-grad-output",
                    "backward modified grad_output in "
                    "place; autograd may hand the same tensor to other nodes, so "
                    "clone it first",
                )
            )
        failures, unchecked = made_up.set_aside(self.problem, failures)
        self.notes += unchecked + [_surrogate_note(f) for f in failures if _surrogate(f)]
        failures = [f for f in failures if not _surrogate(f)]
        self.failures += failures
        passed = not failures and not any(e.check == name for e in self.errors)
        self.summaries.append(
            CheckSummary(name, passed, ev.calls if ev else 0, time.perf_counter() - start)
        )

    def _stages(self, name: str, problem: Problem, ev: Any) -> list[PairFailure]:
        from gradscope.gradcheck.stages import Explainer, first_stage

        mode = "forward" if name == "forward-ad" else "backward"
        _, outs = ev.graph()
        prior = self._stage if name == "forward-ad" else None
        stage = first_stage(ev, self.gen, mode, prior)
        if name == "backward":
            self._stage = stage
            self.infos = [
                replace(info, coverage=_coverage(d))
                for info, d in zip(problem.infos, stage.dirs, strict=False)
            ]
        failing = stage.failing()
        if not failing:
            return []
        if not self.explain:
            return [_unexplained(name, problem, pair, stage) for pair in failing]
        explainer = Explainer(ev, stage, self.gen)
        blocks = explainer.blocks(failing, mode)
        found = [
            self._failure(name, problem, pair, blocks[pair], stage, explainer, outs)
            for pair in failing
        ]
        return [f for f in found if f is not None]

    def _failure(
        self,
        name: str,
        problem: Problem,
        pair: tuple[int, int],
        block: Any,
        stage: Any,
        explainer: Any,
        outs: list[Any],
    ) -> PairFailure | None:
        from gradscope.gradcheck.compared import Context, compare_block, errors, worst
        from gradscope.gradcheck.diagnose import diagnose

        i, o = pair
        info, x = problem.infos[i], problem.inputs[i]  # a complex one as its (re, im) pairs
        ctx = Context(
            info.label,
            tuple(x.shape),
            problem.output_names[o],
            tuple(outs[o].shape),
            x.detach().reshape(-1),
            stage.linear.get(pair, True),
            bool(outs[o].requires_grad) or name == "forward-ad",
            name,
            _others(problem, explainer, pair, block),
            stepped=_stepped(outs[o]),
            complex_sides=problem.complex_sides(i, o),
        )
        compared = compare_block(block, self.tol)
        diagnosis = diagnose(compared, self.tol, ctx)
        if diagnosis is None and block.full:
            return None  # every entry agrees: the sampled alarm was within noise
        diagnosis = diagnosis or Diagnosis(
            "mismatch", "the sampled check failed, but the explanation's sample shows no mismatch"
        )
        max_abs, max_rel = errors(compared, self.tol)
        return PairFailure(
            name,
            info,
            problem.output_names[o],
            o,
            max_abs,
            max_rel,
            worst(compared, ctx),
            diagnosis,
            _resolution(block),
        )


def _stepped(out: Any) -> bool:
    """A floating output whose values are whole numbers, more than one of them (spikes, a
    rounding): it jumps between them. A constant output shows no step."""
    import torch

    if not isinstance(out, torch.Tensor) or not out.is_floating_point() or not out.numel():
        return False
    values = out.detach()
    return bool(torch.equal(values, values.round())) and values.unique().numel() > 1


def _surrogate(f: PairFailure) -> bool:
    return f.diagnosis.slug == SURROGATE


def _surrogate_note(f: PairFailure) -> Note:
    """A surrogate gradient is not a wrong one: said, not failed."""
    return Note(
        SURROGATE,
        f"could not check {f.input.label} -> {f.output}: " + f.diagnosis.message,
        f.input.name,
    )


def _others(problem: Problem, explainer: Any, pair: tuple[int, int], block: Any) -> list[Any]:
    """The inputs of the same shape as input i: (label, their numerical block lazily)."""
    i, o = pair
    return [
        (f"{other.label}", _lazy(explainer, k, o, block))
        for k, other in enumerate(problem.infos)
        if k != i and problem.inputs[k].shape == problem.inputs[i].shape
    ]


def _unexplained(name: str, problem: Problem, pair: tuple[int, int], stage: Any) -> PairFailure:
    i, o = pair
    return PairFailure(
        name,
        problem.infos[i],
        problem.output_names[o],
        o,
        stage.pairs[pair].max_abs,
        None,
        (),
        Diagnosis(
            "unexplained", "the sampled check failed; explanation was turned off (explain=False)"
        ),
        "sampled",
    )


def _resolution(block: Any) -> str:
    """How much of the pair's Jacobian the diagnosis saw."""
    if block.full:
        return "full"
    rows = "all" if block.rows is None else len(block.rows)
    cols = "all" if block.cols is None else len(block.cols)
    return f"{rows} output rows x {cols} input columns"


def _lazy(explainer: Any, k: int, o: int, block: Any) -> Any:
    return lambda: explainer.numerical(k, o, block.rows, block.cols)


def _coverage(d: Any) -> str:
    if d.exact:
        return "its one element" if d.n == 1 else f"all {d.n} elements"
    return f"{len(d.basis)} of {d.n} elements + {d.dense.shape[1]} random directions"
