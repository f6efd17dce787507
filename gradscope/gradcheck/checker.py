"""`gradscope gradcheck`: which gradient of a custom Function is wrong, where, and why.

For each target: build inputs (gradscope/gradcheck/inputs.py), probe one forward
for warnings, then run each check (backward, second-order, forward-ad) in two
stages (gradscope/gradcheck/stages.py): a sampled verdict that keeps slow
mode's per-entry tolerance, and full-resolution blocks only for the pairs that
failed, which gradscope/gradcheck/diagnose.py names. What it is told: options.py.

Python API:

    from gradscope.gradcheck import check
    result = check(MyFunction)              # or a function, an nn.Module, a factory
    assert result.passed, result.failures
"""

from __future__ import annotations

import inspect
import time
from dataclasses import replace
from typing import Any

from gradscope.errors import ConfigError, TargetError, UserCodeError
from gradscope.gradcheck import made_up
from gradscope.gradcheck.input_options import InputOptions
from gradscope.gradcheck.inputs import Problem, build
from gradscope.gradcheck.options import SEED_MAX, SEED_RANGE, Options, options_for
from gradscope.gradcheck.results import (
    CheckError,
    CheckSummary,
    FunctionResult,
    GradcheckReport,
    Note,
)
from gradscope.gradcheck.target_checks import TargetChecks, warm_up
from gradscope.gradcheck.targets import Resolved, defines, resolve, resolve_object
from gradscope.gradcheck.values import ALL, parse_domain, parse_tensor

# torch, and the modules here that load it, are imported in functions: `gradscope --help`
# must not load them

__all__ = ["InputOptions", "Options", "check", "check_resolved", "load", "options_for", "run"]


def load(spec: str) -> list[Resolved]:
    """SPEC → targets, or TargetError / UserCodeError (exit 2)."""
    return resolve(spec)


def check(
    target: Any,
    inputs: Any = None,
    *,
    shapes: dict[str, tuple[int, ...]] | None = None,
    args: dict[str, Any] | None = None,
    dtype: str | None = None,
    seed: int = 0,
    second_order: bool = False,
    forward_ad: bool | None = None,
    label: str | None = None,
    explain: bool = True,
    tensors: dict[str, Any] | None = None,
    domain: str | dict[str, str] | None = None,
) -> FunctionResult:
    """Check a Function class, a function of tensors or an nn.Module from Python.

    `inputs` (a tuple of positional arguments, a dict of keyword arguments, or both as
    `(args, kwargs)`) plays the part of `gradcheck_inputs`; without it they are generated,
    `tensors` (NAME → literal, e.g. {"target": [0, 2, 1]}) and `domain` ("positive", or
    NAME → "positive" / "1.1,3") as on the command line.
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= SEED_MAX:
        raise ValueError(f"seed: {SEED_RANGE}, got {seed!r}")
    name = label or getattr(target, "__qualname__", None) or type(target).__name__
    resolved = resolve_object(target, name, inspect.getmodule(target))
    if inputs is not None:
        resolved.provider = lambda: inputs
    stated = {
        k: parse_tensor(f"{k}={v if isinstance(v, str) else repr(v)}")[1]
        for k, v in (tensors or {}).items()
    }
    domains = dict(
        parse_domain(text if name == ALL else f"{name}={text}")
        for name, text in ({ALL: domain} if isinstance(domain, str) else dict(domain or {})).items()
    )
    options = Options(
        InputOptions(dict(shapes or {}), dict(args or {}), dtype, seed, stated, domains),
        second_order,
        forward_ad,
        explain,
    )
    return check_resolved(resolved, options)


def run(jobs: list[tuple[str, Options]]) -> GradcheckReport:
    """Resolve every SPEC first (a bad one exits 2 before anything runs), then check each."""
    import torch

    resolved = [(t, options) for spec, options in jobs for t in load(spec)]
    _check_names(resolved)
    results = [check_resolved(t, options) for t, options in resolved]
    return GradcheckReport(tuple(results), torch.__version__)


def _check_names(resolved: list[tuple[Resolved, Options]]) -> None:
    """Each --shape/--arg name must be a parameter of some target that generates inputs."""
    generated = [(t, o.inputs) for t, o in resolved if t.provider is None]
    for flag, field_name in (
        ("--shape", "shapes"),
        ("--arg", "args"),
        ("--tensor", "tensors"),
        ("--domain", "domains"),
    ):
        for target, options in generated:
            for name in getattr(options, field_name):
                if name == ALL:
                    continue
                if not any(t.accepts(name) for t, o in generated if name in getattr(o, field_name)):
                    takes = ", ".join(target.signature.parameters) or "no parameters"
                    raise ConfigError(
                        f"{flag} {name}: {target.label} has no parameter named "
                        f"`{name}` (it takes: {takes})"
                    )


def check_resolved(target: Resolved, options: Options) -> FunctionResult:
    """One target's checks; when backward refuses the shape of a made-up input, again with
    that input shaped like the gradient backward returned (made_up.py)."""
    result, problem = _check_once(target, options)
    first = {n: g.describe() for n, g in problem.made_up.items()}
    refits: dict[str, tuple[int, ...]] = {}
    while (fit := made_up.refit(problem, result.errors)) is not None:
        name, shape = fit
        if refits.get(name) == shape or len(refits) >= len(target.signature.parameters):
            raise made_up.refused(
                target.label, name, first[name], shape, "the same again when shaped so"
            )
        refits[name] = shape
        inputs = replace(options.inputs, refits={**options.inputs.refits, **refits})
        try:
            result, problem = _check_once(target, replace(options, inputs=inputs))
        except InputsRejected as exc:
            text = str(exc.original).strip().splitlines()
            why = f"forward raised on it shaped so ({type(exc.original).__name__}"
            why += f": {text[0]})" if text else ")"
            raise made_up.refused(target.label, name, first[name], shape, why) from None
    notes = tuple(made_up.refit_note(n, first[n], shape) for n, shape in refits.items())
    return replace(result, notes=result.notes + notes) if notes else result


def _check_once(target: Resolved, options: Options) -> tuple[FunctionResult, Problem]:
    import torch

    from gradscope.gradcheck import notes as notes_mod
    from gradscope.gradcheck.jacobian import StageError, tolerance

    warm_up()
    start = time.perf_counter()
    problem = build(target, options.inputs)
    tol = tolerance(x.dtype for x in problem.inputs)
    notes = problem.notes + notes_mod.precision(problem, tol)
    seed = options.inputs.seed
    base: dict[str, Any] = dict(
        spec=target.label,
        kind=target.kind,
        dtype=_dtype(problem),
        seed=seed,
        tolerance={"eps": tol.eps, "atol": tol.atol, "rtol": tol.rtol},
    )
    try:
        found, outs = notes_mod.probe(problem)
    except StageError as exc:
        if exc.stage == "forward" and problem.generated:
            raise InputsRejected(problem, exc.original) from None
        error = notes_mod.error("backward", exc, problem)
        return _probe_failed(problem, error, notes, time.perf_counter() - start, base), problem
    if not outs:
        raise TargetError(f"{target.label} returns no floating-point tensor: nothing to check")
    notes += found
    gen = torch.Generator().manual_seed(seed + 1)
    run = TargetChecks(problem, tol, gen, options.explain)
    try:
        for name in _checks(problem, options):
            if name == "second-order" and any(e.check == "backward" for e in run.errors):
                run.notes.append(Note("skipped", "second-order not checked: backward raised"))
                continue
            run.check(name)
    finally:
        problem.restore()  # a module's own parameters, bit for bit as they were
    result = FunctionResult(
        inputs=tuple(run.infos or problem.infos),
        outputs=tuple(problem.output_names),
        checks=tuple(run.summaries),
        failures=tuple(run.failures),
        errors=tuple(run.errors),
        notes=tuple(notes + run.notes),
        duration_s=time.perf_counter() - start,
        **base,
    )
    return result, problem


def _probe_failed(
    problem: Problem, error: CheckError, notes: list[Note], duration_s: float, base: dict[str, Any]
) -> FunctionResult:
    """The result of a target whose probing forward or backward raised: one backward error."""
    return FunctionResult(
        inputs=tuple(problem.infos),
        outputs=tuple(problem.output_names),
        checks=(CheckSummary("backward", False, 1, 0.0),),
        errors=(error,),
        notes=tuple(notes),
        duration_s=duration_s,
        **base,
    )


class InputsRejected(UserCodeError):
    """The forward raised on generated inputs: a usage problem (exit 2) with the way out,
    not a failure of the user's gradients."""

    def __init__(self, problem: Problem, exc: BaseException):
        used = ", ".join(
            f"{i.name} {'×'.join(map(str, i.shape)) or 'scalar'}" for i in problem.infos
        )
        super().__init__(f"{problem.label}: forward on generated inputs ({used})", exc)
        listed = [k for k, v in problem.stated.items() if isinstance(v, (list, tuple))]
        hint = (
            f"; --arg {listed[0]} is a Python list: if a tensor goes there, state it with "
            f"--tensor {listed[0]}=[...]"
            if listed
            else ""
        )
        self.args = (
            f"{self.args[0]}{hint}; state inputs it accepts with --shape NAME=DIMS, "
            "--arg NAME=VALUE, --tensor NAME=LITERAL (integer/bool tensors), --domain "
            "(e.g. positive) or a `gradcheck_inputs` function (docs/gradcheck.md)",
        )


def _dtype(problem: Problem) -> str:
    return ", ".join(sorted({i.dtype for i in problem.infos}))


def _checks(problem: Problem, options: Options) -> list[str]:
    names = ["backward"]
    if options.second_order:
        names.append("second-order")
    has_jvp = defines(problem.function, "jvp")
    if options.forward_ad or (options.forward_ad is None and has_jvp):
        names.append("forward-ad")
    return names
