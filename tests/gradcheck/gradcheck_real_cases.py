"""Cases for gradscope gradcheck against torch.autograd.gradcheck(fast_mode=False), float64.

Each case checks one target with gradscope (as a user would state it: generated inputs,
--arg, --tensor, --domain, gradcheck_inputs) and with torch's slow gradcheck on the very
same input values; the verdicts must be equal. Real packages (entmax, torchdiffeq,
pytorch_wavelets, from the `test` extra) are skipped when not installed.

    python tests/gradcheck/gradcheck_real_cases.py     # prints the agreement table
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from gradscope.examples import functions as ex
from gradscope.gradcheck import check
from gradscope.gradcheck.input_options import InputOptions
from gradscope.gradcheck.inputs import build
from gradscope.gradcheck.targets import resolve_object
from gradscope.gradcheck.values import parse_domain, parse_tensor


def has(package: str) -> bool:
    return importlib.util.find_spec(package) is not None


def generated(target: Any, **options: Any) -> list[torch.Tensor]:
    """The differentiable inputs gradscope generates for `target` (to hand torch the same)."""
    tensors = {k: parse_tensor(f"{k}={v}")[1] for k, v in options.pop("tensors", {}).items()}
    domains = dict(parse_domain(d) for d in options.pop("domains", []))
    problem = build(
        resolve_object(target, "t"), InputOptions(tensors=tensors, domains=domains, **options)
    )
    return [x.clone().requires_grad_() for x in problem.inputs]


def torch_slow(fn: Callable[..., Any], inputs: tuple[Any, ...]) -> bool:
    return bool(torch.autograd.gradcheck(fn, inputs, fast_mode=False, raise_exception=False))


@dataclass
class Case:
    name: str
    gradscope: Callable[[], Any]
    """→ FunctionResult."""
    torch: Callable[[], bool]
    """→ torch's slow-mode verdict on the same inputs."""
    diagnosis: str | None = None
    """The expected diagnosis of a failing case (every failing pair), None for a pass."""
    needs: str | None = None
    """A package the case needs."""


def _cases_own() -> list[Case]:
    out = []

    def fn_case(name, target, call, diagnosis=None, **options):
        def ours():
            return check(
                target,
                tensors=options.get("tensors"),
                domain=dict(d.split("=", 1) if "=" in d else ("", d) for d in options["domains"])
                if "domains" in options
                else None,
                args=options.get("args"),
                shapes=options.get("shapes"),
            )

        def theirs():
            return torch_slow(call, tuple(generated(target, **dict(options))))

        out.append(Case(name, ours, theirs, diagnosis))

    fn_case(
        "ScaledSoftmax (trailing defaults)",
        ex.ScaledSoftmax,
        lambda x: ex.ScaledSoftmax.apply(x, 2.0, -1),
    )
    fn_case(
        "SqrtAtZero --tensor x=[0.0,1.0,4.0]",
        ex.SqrtAtZero,
        ex.SqrtAtZero.apply,
        "not-differentiable",
        tensors={"x": "[0.0,1.0,4.0]"},
    )
    fn_case(
        "SqrtAtZero --domain positive", ex.SqrtAtZero, ex.SqrtAtZero.apply, domains=["positive"]
    )
    fn_case(
        "torch.log --domain unit",
        torch.log,
        torch.log,
        domains=["unit"],
    )
    fn_case("torch.sqrt (real inputs)", torch.sqrt, torch.sqrt, "not-differentiable")
    fn_case(
        "ExpScaledAfterNestedSave (nested save)",
        ex.ExpScaledAfterNestedSave,
        ex.ExpScaledAfterNestedSave.apply,
    )
    fn_case("CumsumOffByOne", ex.CumsumOffByOne, ex.CumsumOffByOne.apply, "index-shift")
    fn_case(
        "nll_loss --tensor target=[0,2,1]",
        torch.nn.functional.nll_loss,
        lambda x: torch.nn.functional.nll_loss(x, torch.tensor([0, 2, 1])),
        shapes={"input": (3, 3)},
        tensors={"target": "[0,2,1]"},
    )
    fn_case(
        "masked_fill --tensor mask=bool",
        masked_scale,
        lambda x: masked_scale(x, torch.tensor([[True, False], [False, True]])),
        shapes={"x": (2, 2)},
        tensors={"mask": "[[True,False],[False,True]]"},
    )

    x16 = ex.ReflectSmoothZeroPadGrad.gradcheck_inputs(generator=torch.Generator().manual_seed(0))
    out.append(
        Case(
            "ReflectSmoothZeroPadGrad (2x16)",
            lambda: check(ex.ReflectSmoothZeroPadGrad),
            lambda: torch_slow(ex.ReflectSmoothZeroPadGrad.apply, (x16,)),
            "boundary",
        )
    )
    x = torch.randn(4, 4, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    out.append(
        Case(
            "ELUWrongBranch (value mask)",
            lambda: check(ex.ELUWrongBranch, inputs=(x.clone().requires_grad_(),)),
            lambda: torch_slow(ex.ELUWrongBranch.apply, (x.clone().requires_grad_(),)),
            "masked",
        )
    )
    pair = (torch.randn(3, dtype=torch.float64), [torch.randn(3, dtype=torch.float64)])
    out.append(
        Case(
            "nested_mix ((a, [b]),)",
            lambda: check(nested_mix, inputs=((_grad(pair[0]), [_grad(pair[1][0])]),)),
            lambda: torch_slow(
                lambda a, b: nested_mix((a, [b])), (_grad(pair[0]), _grad(pair[1][0]))
            ),
        )
    )
    out.append(
        Case(
            "nested_mix_wrong ((a, [b]),)",
            lambda: check(nested_mix_wrong, inputs=((_grad(pair[0]), [_grad(pair[1][0])]),)),
            lambda: torch_slow(
                lambda a, b: nested_mix_wrong((a, [b])), (_grad(pair[0]), _grad(pair[1][0]))
            ),
            "constant-factor",
        )
    )
    out.append(
        Case(
            "HeldWeight (module keeps its parameter)",
            lambda: check(HeldWeight(), shapes={"x": (2, 3)}),
            lambda: torch_slow(
                lambda x, w: HeldWeight.explicit(x, w),
                tuple(generated(HeldWeight(), shapes={"x": (2, 3)})),
            ),
        )
    )
    return out


def _grad(t: torch.Tensor) -> torch.Tensor:
    return t.clone().requires_grad_()


def masked_scale(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (x * 3).masked_fill(mask, 0.0)


def nested_mix(coeffs: Any) -> torch.Tensor:
    low, (high,) = coeffs
    return low.sin() * high + high.exp()


class _Twice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        return t * 2

    @staticmethod
    def backward(ctx, g):
        return g * 3  # wrong: 2


def nested_mix_wrong(coeffs: Any) -> torch.Tensor:
    low, (high,) = coeffs
    return low.sin() + _Twice.apply(high)


class _MatmulHeld(torch.autograd.Function):
    """x @ w.T, where w is looked up in a tuple the module filled at construction."""

    @staticmethod
    def forward(ctx, x, *held):
        ctx.save_for_backward(x, *held)
        return x @ held[0].T

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g @ w, g.T @ x


class HeldWeight(nn.Module):
    """Hands a tuple of its parameters, built once, to a Function (as torchdiffeq's
    adjoint_params): swapping parameters through functional_call would not reach it."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(
            torch.randn(4, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
        )
        self.held = (self.weight,)

    def forward(self, x):
        return torch.tanh(_MatmulHeld.apply(x, *self.held))

    @staticmethod
    def explicit(x, w):
        return torch.tanh(_MatmulHeld.apply(x, w))


def _cases_entmax() -> list[Case]:
    if not has("entmax"):
        return []
    from entmax import activations, losses, root_finding

    out = []
    for fn, call in (
        (root_finding.EntmaxBisectFunction, lambda f: lambda x: f.apply(x, 1.5, -1, 50, True)),
        (root_finding.SparsemaxBisectFunction, lambda f: lambda x: f.apply(x, -1, 50, True)),
        (activations.SparsemaxFunction, lambda f: lambda x: f.apply(x, -1, None)),
        (activations.Entmax15Function, lambda f: lambda x: f.apply(x, 0, None)),
    ):
        out.append(
            Case(
                f"entmax {fn.__name__} (defaults)",
                lambda fn=fn: check(fn),
                lambda fn=fn, call=call: torch_slow(call(fn), tuple(generated(fn))),
                needs="entmax",
            )
        )
    fn = root_finding.EntmaxBisectFunction
    opts = {"shapes": {"alpha": (4, 1)}, "domains": ["alpha=1.1,3"]}
    out.append(
        Case(
            "entmax EntmaxBisectFunction --domain alpha=1.1,3",
            lambda: check(fn, shapes={"alpha": (4, 1)}, domain={"alpha": "1.1,3"}),
            lambda: torch_slow(lambda x, a: fn.apply(x, a), tuple(generated(fn, **dict(opts)))),
            needs="entmax",
        )
    )
    for loss in (losses.Entmax15LossFunction, losses.SparsemaxLossFunction):
        out.append(
            Case(
                f"entmax {loss.__name__} --tensor target=[0,2,1,3]",
                lambda loss=loss: check(loss, tensors={"target": "[0,2,1,3]"}),
                lambda loss=loss: torch_slow(
                    lambda x: loss.apply(x, torch.tensor([0, 2, 1, 3]), None),
                    tuple(generated(loss, tensors={"target": "[0,2,1,3]"})),
                ),
                needs="entmax",
            )
        )
    return out


def _cases_torchdiffeq() -> list[Case]:
    if not has("torchdiffeq"):
        return []
    from torchdiffeq import odeint, odeint_adjoint

    class Dynamics(nn.Module):
        def __init__(self, w=None, b=None):
            super().__init__()
            g = torch.Generator().manual_seed(0)
            if w is None:
                self.w = nn.Parameter(torch.randn(3, 3, generator=g, dtype=torch.float64) / 2)
                self.b = nn.Parameter(torch.randn(3, generator=g, dtype=torch.float64) / 2)
            else:
                self.w, self.b = w, b

        def forward(self, t, y):
            return torch.tanh(y @ self.w.T + self.b)

    times = torch.tensor([0.0, 0.5], dtype=torch.float64)
    options = {"method": "rk4", "options": {"step_size": 0.1}}

    class Adjoint(nn.Module):
        def __init__(self):
            super().__init__()
            self.func = Dynamics()

        def forward(self, y0):
            params = tuple(self.func.parameters())
            return odeint_adjoint(self.func, y0, times, adjoint_params=params, **options)[-1]

    class Direct(Adjoint):
        def forward(self, y0):
            return odeint(self.func, y0, times, **options)[-1]

    def adjoint_explicit(y0, w, b):
        func = Dynamics(w, b)
        return odeint_adjoint(func, y0, times, adjoint_params=(w, b), **options)[-1]

    def direct_explicit(y0, w, b):
        return odeint(Dynamics(w, b), y0, times, **options)[-1]

    return [
        Case(
            f"torchdiffeq {name} (module, parameters)",
            lambda module=module: check(module(), shapes={"y0": (2, 3)}),
            lambda module=module, explicit=explicit: torch_slow(
                explicit, tuple(generated(module(), shapes={"y0": (2, 3)}))
            ),
            needs="torchdiffeq",
        )
        for name, module, explicit in (
            ("odeint_adjoint", Adjoint, adjoint_explicit),
            ("odeint", Direct, direct_explicit),
        )
    ]


def _cases_wavelets() -> list[Case]:
    if not has("pytorch_wavelets"):
        return []
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pytorch_wavelets import DWT1DForward, DWT1DInverse, DWTForward, DWTInverse

    out = []
    for mode in ("zero", "symmetric", "reflect"):
        x = torch.randn(1, 1, 16, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        fwd = DWT1DForward(J=1, wave="db2", mode=mode).double()
        inv = DWT1DInverse(wave="db2", mode=mode).double()
        yl, (yh,) = fwd(x)
        expect = None if mode == "zero" else "boundary"
        out.append(
            Case(
                f"pytorch_wavelets DWT1DForward db2 {mode}",
                lambda fwd=fwd, x=x: check(fwd, inputs=(_grad(x),)),
                lambda fwd=fwd, x=x: torch_slow(lambda t: _flat(fwd(t)), (_grad(x),)),
                expect,
                "pytorch_wavelets",
            )
        )
        out.append(
            Case(
                f"pytorch_wavelets DWT1DInverse db2 {mode} ((yl, [yh]),)",
                lambda inv=inv, yl=yl, yh=yh: check(inv, inputs=((_grad(yl), [_grad(yh)]),)),
                lambda inv=inv, yl=yl, yh=yh: torch_slow(
                    lambda a, b: inv((a, [b])), (_grad(yl), _grad(yh))
                ),
                expect,
                "pytorch_wavelets",
            )
        )
    x2 = torch.randn(1, 1, 16, 16, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    for mode in ("zero", "symmetric"):
        inv2 = DWTInverse(wave="db2", mode=mode).double()
        yl2, (yh2,) = DWTForward(J=1, wave="db2", mode=mode).double()(x2)
        out.append(
            Case(
                f"pytorch_wavelets DWTInverse db2 {mode} ((yl, [yh]),)",
                lambda inv2=inv2, yl2=yl2, yh2=yh2: check(
                    inv2, inputs=((_grad(yl2), [_grad(yh2)]),)
                ),
                lambda inv2=inv2, yl2=yl2, yh2=yh2: torch_slow(
                    lambda a, b: inv2((a, [b])), (_grad(yl2), _grad(yh2))
                ),
                None if mode == "zero" else "boundary",
                "pytorch_wavelets",
            )
        )
    return out


def _flat(out: Any) -> tuple[torch.Tensor, ...]:
    low, highs = out
    return (low, *highs)


def cases() -> list[Case]:
    return _cases_own() + _cases_entmax() + _cases_torchdiffeq() + _cases_wavelets()


def table() -> None:
    print("| case | torch slow | gradscope | diagnosis | torch s | gradscope s |")
    print("|---|---|---|---|---|---|")
    for case in cases():
        start = time.perf_counter()
        theirs = case.torch()
        mid = time.perf_counter()
        ours = case.gradscope()
        end = time.perf_counter()
        slugs = sorted(
            {f.diagnosis.slug for f in ours.failures} | {e.diagnosis.slug for e in ours.errors}
        )
        print(
            f"| {case.name} | {'PASS' if theirs else 'FAIL'} | "
            f"{'PASS' if ours.passed else 'FAIL'} | {', '.join(slugs) or '-'} | "
            f"{mid - start:.2f} | {end - mid:.2f} |"
        )


if __name__ == "__main__":
    table()
