"""Build a target's inputs and reduce it to a function of its differentiable tensors.

Inputs come from the target's `gradcheck_inputs` when it has one (provided.py), otherwise
from its signature: every parameter without a default gets a made-up value, a
standard-normal float64 tensor of DEFAULT_SHAPE with requires_grad=True unless its name
says more (guesses.py), drawn in signature order from a generator seeded with `seed`
(mapped into a `--domain` when one is given); parameters with defaults keep them (a
Function's are passed to `.apply`, which has no keywords); `--shape NAME=DIMS`,
`--arg NAME=VALUE` and `--tensor NAME=LITERAL` override one parameter each (what they say:
input_options.py).

Tensors nested in an argument (tuples, lists, dicts) are inputs too, as torch's own
checks flatten them. An nn.Module's parameters are differentiated as the module's own
tensors: perturbed in place (under no_grad) and restored bit-exactly, never swapped, so
code that holds references to them (torchdiffeq's `adjoint_params`) sees every change.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gradscope.errors import TargetError
from gradscope.gradcheck.complex_view import (
    as_complex,
    as_real,
    differentiable,
    random_complex,
    realified_output,
)
from gradscope.gradcheck.guesses import Guess, guess
from gradscope.gradcheck.input_options import InputOptions
from gradscope.gradcheck.nesting import Path, flatten, is_dual, nested, replaced
from gradscope.gradcheck.provided import from_provider
from gradscope.gradcheck.results import InputInfo, Note
from gradscope.gradcheck.targets import PROVIDER, Resolved, non_tensor_annotation
from gradscope.gradcheck.values import ALL, Domain, make_tensor

# torch is imported in functions: `gradscope --help` must not load it

DEFAULT_SHAPE = (4, 4)
"""Square, so matrix products of generated inputs are defined (and a transposed gradient is
caught as a wrong value rather than as a shape error)."""
P = inspect.Parameter


@dataclass(frozen=True)
class Slot:
    """Where a differentiable tensor goes in the call."""

    where: str
    """pos, kw or param (a module's own parameter)."""
    key: Any
    """Position, keyword name or parameter name."""
    path: Path = ()


@dataclass
class Problem:
    """A target as a function of its differentiable tensors, with names for reports."""

    label: str
    kind: str
    fn: Callable[..., list[Any]]
    """Differentiable tensors, in `infos` order → the floating-point outputs, flattened."""
    inputs: list[Any]
    """Base values (detached copies): every evaluation starts from these."""
    infos: list[InputInfo]
    function: Any = None
    """The torch.autograd.Function class, for Function targets."""
    call: list[tuple[str, bool]] = field(default_factory=list)
    """(name, is a differentiable tensor) for each argument of the call, in order."""
    output_names: list[str] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    owned: list[Any] = field(default_factory=list)
    """Per input, the tensor the target itself holds (a module parameter), else None."""
    generated: bool = False
    """The inputs were generated from the signature (not given by gradcheck_inputs)."""
    stated: dict[str, Any] = field(default_factory=dict)
    """--arg values, to explain a forward that rejects them."""
    made_up: dict[str, Guess] = field(default_factory=dict)
    """NAME → how its value was made up, for the parameters nobody stated (gradcheck_inputs,
    --arg, --shape, --tensor, a default): a failure these explain is not the Function's."""
    complex_inputs: list[bool] = field(default_factory=list)
    """Per input: a complex tensor, checked as its (re, im) pairs (complex_view)."""
    complex_outputs: set[str] = field(default_factory=set)
    """The outputs that are complex, checked as their (re, im) pairs."""

    def leaves(self) -> list[Any]:
        """Inputs to build a graph on: fresh leaves, and each owned tensor itself at its base
        value, so gradients are read where the target's code puts them."""
        self.restore()
        return [
            x.detach().clone().requires_grad_() if own is None else own
            for x, own in zip(self.inputs, self.owned or [None] * len(self.inputs), strict=True)
        ]

    def restore(self) -> None:
        """Owned tensors back to their base values, bit for bit (a no-op when they are)."""
        import torch

        with torch.no_grad():
            for own, base in zip(self.owned, self.inputs, strict=False):
                if own is not None and not torch.equal(own, base):
                    own.copy_(base)

    def complex_sides(self, i: int, o: int) -> tuple[bool, bool]:
        """Whether output o and input i are complex (checked as (re, im) pairs)."""
        paired = bool(self.complex_inputs) and self.complex_inputs[i]
        return self.output_names[o] in self.complex_outputs, paired

    def wrt(self, tensors: list[Any]) -> list[Any]:
        """What to differentiate a call on `tensors` with respect to: owned tensors stand for
        the values written into them."""
        return [
            t if own is None else own
            for t, own in zip(tensors, self.owned or [None] * len(tensors), strict=True)
        ]


def build(target: Resolved, options: InputOptions) -> Problem:
    import torch

    dtype = getattr(torch, options.dtype or "float64")
    gen = torch.Generator().manual_seed(options.seed)
    notes: list[Note] = []
    if target.kind == "module":
        target.obj.to(dtype)
    provided = from_provider(target, options, gen, dtype, notes) if target.provider else None
    made_up: dict[str, Guess] = {}
    pos, kw = provided if provided is not None else _generated(target, options, gen, dtype, made_up)
    _no_meta(target, pos, kw)
    if target.kind == "autograd.Function" and kw:
        raise TargetError(
            f"{target.label}: Function.apply takes positional arguments only; "
            f"cannot pass {', '.join(kw)}"
        )
    slots, infos, chosen = _differentiable(target, pos, kw, notes)
    if not chosen:
        raise TargetError(
            f"{target.label}: no floating-point tensor input requires grad, so "
            "there is no gradient to check"
        )
    call = [
        (name, any(s.where == "pos" and s.key == i for s in slots))
        for i, (name, _) in enumerate(pos)
    ]
    owned = [v if s.where == "param" else None for s, v in zip(slots, chosen, strict=True)]
    paired = [v.is_complex() and s.where != "param" for s, v in zip(slots, chosen, strict=True)]
    problem = Problem(
        target.label,
        target.kind,
        lambda *t: [],
        [as_real(v) if c else v.detach().clone() for v, c in zip(chosen, paired, strict=True)],
        infos,
        target.obj if target.kind == "autograd.Function" else None,
        call,
        notes=notes,
        owned=owned,
        generated=provided is None,
        stated={k: v for k, v in options.args.items()},
        made_up=made_up,
        complex_inputs=paired,
    )
    problem.fn = _make_fn(target, problem, [v for _, v in pos], kw, slots)
    return problem


def _no_meta(target: Resolved, pos: list[tuple[str, Any]], kw: dict[str, Any]) -> None:
    """A meta tensor has a shape and no values: nothing to compare numerically (and torch's
    comparisons raise on it). Said as the user's input problem (exit 2), naming the tensors."""
    found = [
        name + suffix
        for name, value in [*pos, *kw.items()]
        for _, suffix, t in nested(value)
        if t.is_meta
    ]
    if target.kind == "module":
        found += [n for n, t in target.obj.named_parameters() if t.is_meta]
        found += [n for n, t in target.obj.named_buffers() if t.is_meta]
    if found:
        names = ", ".join(found[:4]) + (f" and {len(found) - 4} more" if len(found) > 4 else "")
        raise TargetError(
            f"{target.label}: {names} on the meta device: a meta tensor has a shape but no "
            "values, so its gradients cannot be checked numerically; give real tensors "
            "(e.g. device='cpu')"
        )


def _tensor(shape: tuple[int, ...], gen: Any, dtype: Any, domain: Domain | None = None) -> Any:
    import torch

    if dtype.is_complex:
        return random_complex(shape, gen, dtype, domain)
    z = torch.randn(shape, generator=gen, dtype=torch.float64)
    if domain is not None:
        z = domain.sample(z)
    return z.to(dtype).requires_grad_()


def _generated(
    target: Resolved, options: InputOptions, gen: Any, dtype: Any, made_up: dict[str, Guess]
) -> tuple[list[tuple[str, Any]], dict[str, Any]]:
    """Signature → values: --arg, --tensor, --shape, the default, or a made-up value (kept in
    `made_up`)."""
    pos: list[tuple[str, Any]] = []
    kw: dict[str, Any] = {}
    keep_defaults = target.kind == "autograd.Function"  # apply() is positional only
    skipped = False
    for p in target.signature.parameters.values():
        if p.kind in (P.VAR_POSITIONAL, P.VAR_KEYWORD):
            continue
        domain = options.domains.get(p.name, options.domains.get(ALL))
        if p.name in options.args:
            value = options.args[p.name]
        elif p.name in options.tensors:
            value = make_tensor(options.tensors[p.name], dtype)
        elif p.name in options.shapes:
            value = _tensor(options.shapes[p.name], gen, dtype, domain)
        elif p.default is not P.empty:
            if not keep_defaults:
                skipped = True
                continue
            value = p.default
        else:
            value = _made_up(target, p, options, gen, dtype, made_up)
        if p.kind is P.KEYWORD_ONLY or skipped:
            kw[p.name] = value
        else:
            pos.append((p.name, value))
    stated = {**options.args, **options.tensors}
    extra = {
        k: make_tensor(v, dtype) if k in options.tensors and k not in options.args else v
        for k, v in stated.items()
        if k not in target.signature.parameters and target.accepts(k)
    }
    return pos, {**kw, **extra}


def _made_up(
    target: Resolved,
    p: inspect.Parameter,
    options: InputOptions,
    gen: Any,
    dtype: Any,
    made_up: dict[str, Guess],
) -> Any:
    """A value for a parameter nobody stated: what its name suggests (guesses.py), or the
    shape backward's gradient had on an earlier try."""
    made = guess(p.name, DEFAULT_SHAPE)
    if p.name in options.refits:
        made = Guess(options.refits[p.name], why="the shape of the gradient backward returns")
    if non_tensor_annotation(p) and made.shape is not None:
        raise TargetError(
            f"{target.label}: parameter `{p.name}` "
            f"({non_tensor_annotation(p)}) has no default; pass "
            f"--arg {p.name}=VALUE"
        )
    made_up[p.name] = made
    if made.shape is None:
        return made.value
    domain = options.domains.get(p.name, options.domains.get(ALL, made.domain))
    return _tensor(made.shape, gen, dtype, domain)


def _differentiable(
    target: Resolved, pos: list[tuple[str, Any]], kw: dict[str, Any], notes: list[Note]
) -> tuple[list[Slot], list[InputInfo], list[Any]]:
    """The floating tensors to differentiate, nested ones included: those that require grad
    (all, if none is marked), then a module's own parameters."""
    import torch

    found: list[tuple[Slot, str, int | None, Any]] = [
        (Slot("pos", i, path), name + suffix, i, v)
        for i, (name, value) in enumerate(pos)
        for path, suffix, v in nested(value)
    ]
    found += [
        (Slot("kw", name, path), name + suffix, None, v)
        for name, value in kw.items()
        for path, suffix, v in nested(value)
    ]
    found = [f for f in found if differentiable(f[3])]
    chosen = [f for f in found if f[3].requires_grad]
    if found and not chosen:
        notes.append(
            Note(
                "no-requires-grad",
                f"{PROVIDER}() marked no tensor requires_grad=True;"
                " checking every floating-point tensor input",
            )
        )
        chosen = found
    if target.kind == "module":
        chosen += [
            (Slot("param", n), n, None, p)
            for n, p in target.obj.named_parameters()
            if p.requires_grad and isinstance(p, torch.Tensor)
        ]
    infos = [
        InputInfo(
            name,
            position,
            "parameter"
            if slot.where == "param"
            else ("keyword" if position is None else "positional"),
            tuple(v.shape),
            str(v.dtype).removeprefix("torch."),
        )
        for slot, name, position, v in chosen
    ]
    return [c[0] for c in chosen], infos, [c[3] for c in chosen]


def _make_fn(
    target: Resolved,
    problem: Problem,
    args: list[Any],
    kw: dict[str, Any],
    slots: list[Slot],
) -> Callable[..., list[Any]]:
    invoke = _invoker(target)

    def fn(*tensors: Any) -> list[Any]:
        import torch

        call_args, call_kw = list(args), dict(kw)
        for slot, t, own, paired in zip(
            slots, tensors, problem.owned, problem.complex_inputs, strict=True
        ):
            t = as_complex(t) if paired else t
            if slot.where == "pos":
                call_args[slot.key] = replaced(call_args[slot.key], slot.path, t)
            elif slot.where == "kw":
                call_kw[slot.key] = replaced(call_kw[slot.key], slot.path, t)
            elif t is not own and (is_dual(t) or not torch.equal(t, own)):
                with torch.no_grad():
                    own.copy_(t)  # the module's own tensor: whoever holds it sees the change
        names, outs = flatten(invoke(call_args, call_kw))
        problem.complex_outputs.update(
            n for n, o in zip(names, outs, strict=True) if o.is_complex()
        )
        outs = [realified_output(o) for o in outs]
        if not problem.output_names:
            problem.output_names[:] = names
        elif names != problem.output_names:
            raise RuntimeError(
                f"the target returned outputs {names} after {problem.output_names}"
                "; a gradcheck needs the same outputs on every call"
            )
        return outs

    return fn


def _invoker(target: Resolved) -> Callable[[list[Any], dict[str, Any]], Any]:
    obj = target.obj
    if target.kind == "autograd.Function":
        return lambda a, k: obj.apply(*a)
    return lambda a, k: obj(*a, **k)
