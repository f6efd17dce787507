"""Two models, one batch, the same weights: where do they start to differ?

1. pair parameters and modules by name (`align`); copy the reference's weights into the
   new model for every pair of equal shape (restored afterwards, with everything else);
2. one traced pass of each, seeded alike (`run.trace`): every module call's inputs and
   outputs, the loss, every gradient;
3. compare (`compare`): the first module, in the order forwards finish, whose output
   differs while its inputs agree is where the difference starts; the first differing
   gradient in backward order (nearest the loss first);
4. only when something differs: each model's forward once more with another seed. A module whose
   output changes with the seed is random there (dropout in training mode): if the
   reference is, the comparison is noise-limited; if only the new model is, randomness
   was left on in it.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from typing import Any

import torch

from gradscope.diff import align, findings
from gradscope.diff.compare import Batch, Pending, Tolerances, origin
from gradscope.diff.options import DiffOptions
from gradscope.diff.origin_facts import first_grad, first_input_inside, where_it_starts
from gradscope.diff.result import Alignment, Delta, DiffResult, ModuleRow, ParamRow, Tolerance
from gradscope.diff.run import Trace, trace, where
from gradscope.errors import TargetError


@dataclass
class _Plan:
    params: list[tuple[str, str, str, bool]]
    """(ref, new, how, copied) for every pair of compatible shape."""
    modules: dict[str, str]
    alignment: Alignment


def diff(
    ref: torch.nn.Module,
    new: torch.nn.Module,
    batch: Any,
    loss_fn: Callable[[Any], Any] | None = None,
    *,
    options: DiffOptions | None = None,
    ref_label: str | None = None,
    new_label: str | None = None,
) -> DiffResult:
    """Run `ref` and `new` on `batch` (with the same loss) and say where they first differ.

    Both models are left exactly as they were found."""
    options = options or DiffOptions()
    for what, m in (("reference", ref), ("new model", new)):
        if not isinstance(m, torch.nn.Module):
            raise TargetError(f"the {what} is {type(m).__name__}, not a torch.nn.Module")
    start = time.perf_counter()
    if options.compile:
        new = _compiled(new)
    plan = _plan(ref, new, options)
    setting = _autocast(new, options.autocast)
    with _copied(ref, new, plan.params):
        ref_trace = trace(ref, batch, loss_fn, options.seed)
        with _deterministic(options.deterministic):
            new_trace = trace(new, batch, loss_fn, options.seed, setting)
        result = _compare(ref, new, ref_trace, new_trace, plan, options)
        if result.differs and options.noise_check:
            again_ref = trace(ref, batch, loss_fn, options.seed + 1, backward=False)
            with _deterministic(options.deterministic):
                again_new = trace(new, batch, loss_fn, options.seed + 1, setting, backward=False)
            result = _randomness(result, ref_trace, again_ref, new_trace, again_new, options)
    result.ref_label = ref_label or type(ref).__name__
    result.new_label = new_label or type(new).__name__
    result.setting = " + ".join(
        s
        for s in (
            "torch.compile" if options.compile else "",
            _autocast_text(options.autocast),
            "deterministic algorithms" if options.deterministic else "",
        )
        if s
    )
    result.duration_s = time.perf_counter() - start
    result.torch_version = torch.__version__
    result.findings = findings.of(result)
    return result


def _autocast_text(dtype: str | None) -> str:
    return f"autocast {dtype}" if dtype else ""


@contextmanager
def _deterministic(on: bool) -> Iterator[None]:
    """torch.use_deterministic_algorithms(True) for one pass, everything restored after (an
    op with no deterministic implementation raises: said as a target error, exit 2)."""
    if not on:
        yield
        return
    cudnn = torch.backends.cudnn
    kept = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        cudnn.deterministic,
        cudnn.benchmark,
    )
    workspace = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    if workspace is None:  # cuBLAS refuses deterministic mode without it
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    torch.use_deterministic_algorithms(True)
    cudnn.deterministic, cudnn.benchmark = True, False
    try:
        yield
    except RuntimeError as exc:
        if "deterministic" not in str(exc):
            raise
        raise TargetError(f"--b-deterministic: {str(exc).strip().splitlines()[0]}") from None
    finally:
        torch.use_deterministic_algorithms(kept[0], warn_only=kept[1])
        cudnn.deterministic, cudnn.benchmark = kept[2], kept[3]
        if workspace is None:
            os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)


def _compiled(model: torch.nn.Module) -> torch.nn.Module:
    """torch.compile(model): compiled at its first call, inside the traced pass (the
    recording hooks are in place then, so the graph breaks at module boundaries)."""
    try:
        return torch.compile(model)  # type: ignore[return-value]
    except Exception as exc:
        raise TargetError(f"torch.compile refused the model: {type(exc).__name__}: {exc}") from None


def _autocast(
    model: torch.nn.Module, dtype: str | None
) -> Callable[[], AbstractContextManager[Any]] | None:
    if dtype is None:
        return None
    device = next((p.device.type for p in model.parameters()), "cpu")
    kind = getattr(torch, dtype)
    return lambda: torch.autocast(device_type=device, dtype=kind)


def _plan(ref: torch.nn.Module, new: torch.nn.Module, options: DiffOptions) -> _Plan:
    ref_p = {n: tuple(p.shape) for n, p in ref.named_parameters()}
    new_p = {n: tuple(p.shape) for n, p in new.named_parameters()}
    pairing = align.pair_names(list(ref_p), list(new_p), options.names)
    params, transposed, mismatched = [], [], []
    for r, (n, how) in pairing.pairs.items():
        kind = align.classify(ref_p[r], new_p[n])
        if kind == "same":
            params.append((r, n, how, new is not ref))
        elif kind == "transposed":
            transposed.append((r, n))
            params.append((r, n, "transposed", options.allow_transposed))
        else:
            mismatched.append((r, n, align.shape_text(ref_p[r], new_p[n])))
    if ref_p and new_p and not any(how != "transposed" for _, _, how, _ in params):
        raise TargetError(
            f"no parameter of the new model matches one of the reference by name and shape "
            f"(reference: {_sample(list(ref_p))}; new: {_sample(list(new_p))}); "
            "pair them with --name-map FILE"
        )
    modules = _pair_modules(ref, new, params, options.names)
    ref_m = [n for n, _ in ref.named_modules()]
    new_m = [n for n, _ in new.named_modules()]
    paired_new = set(modules.values())
    alignment = Alignment(
        tuple((r, n, how) for r, n, how, _ in params if how != "transposed"),
        tuple(transposed),
        tuple(mismatched),
        pairing.ref_only,
        pairing.new_only,
        pairing.prefixes,
        tuple(m for m in ref_m if m not in modules),
        tuple(m for m in new_m if m not in paired_new),
    )
    return _Plan(params, modules, alignment)


def _sample(names: Sequence[str], most: int = 3) -> str:
    more = f", ... ({len(names)} in all)" if len(names) > most else ""
    return ", ".join(names[:most]) + more


def _pair_modules(
    ref: torch.nn.Module,
    new: torch.nn.Module,
    params: Sequence[tuple[str, str, str, bool]],
    names: align.NameMap,
) -> dict[str, str]:
    """Owners of paired parameters first, then the remaining modules by name."""
    if new is ref:
        return {n: n for n, _ in ref.named_modules()}
    modules: dict[str, str] = {"": ""}
    used = {""}
    for r, n, _, _ in params:
        r_owner, n_owner = align.owner(r), align.owner(n)
        if r_owner not in modules and n_owner not in used:
            modules[r_owner] = n_owner
            used.add(n_owner)
    rest_ref = [n for n, _ in ref.named_modules() if n not in modules]
    rest_new = [n for n, _ in new.named_modules() if n not in used]
    for r, (n, _) in align.pair_names(rest_ref, rest_new, names).pairs.items():
        modules[r] = n
    return modules


@contextmanager
def _copied(
    ref: torch.nn.Module, new: torch.nn.Module, params: Sequence[tuple[str, str, str, bool]]
) -> Iterator[None]:
    """The reference's values in the new model's paired parameters; the new model's own
    values put back afterwards, whatever happens."""
    if new is ref:
        yield
        return
    ref_p, new_p = dict(ref.named_parameters()), dict(new.named_parameters())
    todo = [(ref_p[r], new_p[n], how) for r, n, how, copied in params if copied]
    saved = [(dst, dst.detach().clone()) for _, dst, _ in todo]
    try:
        with torch.no_grad():
            for src, dst, how in todo:
                value = src.detach().t() if how == "transposed" else src.detach()
                dst.copy_(value.to(device=dst.device, dtype=dst.dtype))
        yield
    finally:
        with torch.no_grad():
            for dst, value in saved:
                dst.copy_(value)


def _tolerances(options: DiffOptions) -> Tolerances:
    floor = getattr(torch, options.autocast) if options.autocast else None
    return Tolerances(options.rtol, options.atol, options.exact, floor)


_QueuedCall = tuple[str, str | None, int, str, Pending | None, Pending | None]
"""A module call to compare: its name, its partner, its index, its kind, its outputs and
inputs queued in the batch (None: no partner)."""
_QueuedGrad = tuple[str, str, str, bool, Pending | None, str]
"""A parameter pair: reference name, new name, how paired, copied, gradients queued, note."""


def _compare(
    ref: torch.nn.Module,
    new: torch.nn.Module,
    a: Trace,
    b: Trace,
    plan: _Plan,
    options: DiffOptions,
) -> DiffResult:
    tol = _tolerances(options)
    batch = Batch(tol)
    ref_mods, new_mods = dict(ref.named_modules()), dict(new.named_modules())
    queued = _queue_calls(a, b, plan, batch)
    grads = _queue_grads(a, b, plan, batch)
    loss = batch.pairs([a.loss], [b.loss])
    values = batch.read()
    rows = [
        ModuleRow(
            name,
            partner,
            index,
            kind,
            out.delta(values) if out else None,
            inp.delta(values) if inp else None,
            ref_where=where(ref_mods[name]),
            new_where=where(new_mods[partner]) if partner in new_mods else "",
        )
        for name, partner, index, kind, out, inp in queued
    ]
    params = _param_rows(grads, values, {n: tuple(p.shape) for n, p in ref.named_parameters()})
    start, first = origin([r.differs for r in rows], [r.inputs_agree for r in rows])
    if start is not None:
        rows[start] = where_it_starts(rows[start], ref, new, ref_mods, new_mods)
    return DiffResult(
        "",
        "",
        rows,
        params,
        plan.alignment,
        loss.delta(values) if loss else None,
        float(a.loss.float().mean()),
        float(b.loss.float().mean()),
        start,
        first,
        first_input_inside(rows, start),
        first_grad(params, rows),
        tol.base(),
        new_ran=tuple(dict.fromkeys(c.name for c in b.calls)),
        passes=2,
    )


def _queue_calls(a: Trace, b: Trace, plan: _Plan, batch: Batch) -> list[_QueuedCall]:
    """Each reference module call with its partner's, outputs and inputs queued."""
    queued: list[_QueuedCall] = []
    for call in a.calls:
        partner = plan.modules.get(call.name)
        other = b.by_key.get((partner, call.index)) if partner is not None else None
        kind = (
            call.kind if other is None or other.kind == call.kind else f"{call.kind} ↔ {other.kind}"
        )
        out = batch.pairs(call.outputs, other.outputs) if other else None
        inp = batch.pairs(call.inputs, other.inputs) if other else None
        queued.append((call.name, partner, call.index, kind, out, inp))
    return queued


def _queue_grads(a: Trace, b: Trace, plan: _Plan, batch: Batch) -> list[_QueuedGrad]:
    """Each paired parameter's two gradients queued, or a note on why they are not."""
    grads: list[_QueuedGrad] = []
    for r, n, how, copied in plan.params:
        g_ref, g_new = a.grads.get(r), b.grads.get(n)
        note, pending = "", None
        if how == "transposed" and not copied:
            note = "shape reversed: not copied (--allow-transposed copies it transposed)"
        elif g_ref is not None and g_new is not None:
            pending = batch.pairs([g_ref], [g_new.t() if how == "transposed" else g_new], True)
        elif (g_ref is None) != (g_new is None):
            note = f"gradient on the {'reference' if g_new is None else 'new model'} only"
        grads.append((r, n, how, copied, pending, note))
    return grads


def _param_rows(
    grads: Sequence[_QueuedGrad],
    values: list[list[float]],
    shapes: dict[str, tuple[int, ...]],
) -> list[ParamRow]:
    out = []
    for r, n, how, copied, pending, note in grads:
        delta = pending.delta(values) if pending else None
        if delta is None and note.startswith("gradient on"):
            delta = Delta(math.inf, 0.0, True, Tolerance(0.0, 0.0, True, "one side only"))
        out.append(ParamRow(r, n, shapes[r], how, copied, delta, note))
    return out


def _randomness(
    result: DiffResult,
    ref1: Trace,
    ref2: Trace,
    new1: Trace,
    new2: Trace,
    options: DiffOptions,
) -> DiffResult:
    """Mark, in each model, the call where randomness enters: its output changes with the
    seed while its inputs do not (everything after it changes too, and is not marked)."""
    batch = Batch(_tolerances(options))
    checks = []
    for row in result.modules:
        ref_pair = (ref1.by_key.get((row.ref, row.call)), ref2.by_key.get((row.ref, row.call)))
        key = (row.new or "", row.call)
        new_pair = (new1.by_key.get(key), new2.by_key.get(key)) if row.new is not None else None
        checks.append([_seed_check(batch, ref_pair), _seed_check(batch, new_pair)])
    values = batch.read()
    flags = [[_enters(c, values) for c in pair] for pair in checks]
    rows = [
        replace(row, ref_random=r, new_random=n)
        for row, (r, n) in zip(result.modules, flags, strict=True)
    ]
    return replace(result, modules=rows, passes=4)


def _seed_check(batch: Batch, pair: Any) -> tuple[Pending | None, Pending | None] | None:
    if pair is None or pair[0] is None or pair[1] is None:
        return None
    a, b = pair
    return batch.pairs(a.outputs, b.outputs), batch.pairs(a.inputs, b.inputs)


def _enters(check: tuple[Pending | None, Pending | None] | None, values: Any) -> bool:
    if check is None or check[0] is None:
        return False
    out, inp = check
    return (
        out is not None
        and out.delta(values).differs
        and (inp is None or not inp.delta(values).differs)
    )
