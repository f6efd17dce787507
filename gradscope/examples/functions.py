"""Built-in custom autograd Functions for `gradscope gradcheck`: one correct, the rest
broken on purpose, one bug each (its docstring says which).

    gradscope gradcheck gradscope.examples.functions:CustomReLU       # passes
    gradscope gradcheck gradscope.examples.functions:SquareMissingFactor
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.autograd.function import once_differentiable

__all__ = [
    "BackwardRaises",
    "CumsumOffByOne",
    "CustomReLU",
    "ELUWrongBranch",
    "ExpSavedThenModified",
    "ExpScaledAfterNestedSave",
    "MaskedScaleSum",
    "MatMulTransposedGrad",
    "MulNoneGrad",
    "MulSwappedGrads",
    "PowerTooFewGrads",
    "ReflectSmoothZeroPadGrad",
    "ScaleIgnoresGradOutput",
    "ScaledSoftmax",
    "SinWithJvp",
    "SinWrongJvp",
    "SinWrongSign",
    "SqrtAtZero",
    "SquareDetachedBackward",
    "SquareMissingFactor",
    "SquareOnceDifferentiable",
    "detached_tanh",
]


class CustomReLU(torch.autograd.Function):
    """The tutorial's ReLU, correct: the derivative is 1 where input > 0, else 0."""

    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return input.clamp(min=0)

    @staticmethod
    def backward(ctx, grad_output):
        (input,) = ctx.saved_tensors
        grad_input = grad_output.clone()
        grad_input[input < 0] = 0
        return grad_input


class MaskedScaleSum(torch.autograd.Function):
    """Correct, and awkward on purpose: classmethods, non-tensor arguments between tensors
    (int, bool mask, dict, str, callable), an integer index tensor, three outputs (one
    integer) and more trailing Nones than inputs.

    Returns y = x * w * options["scale"] * mask and y summed over `dim`, gathered at `index`.
    """

    @classmethod
    def forward(
        cls,
        ctx,
        x,
        dim: int,
        mask,
        w,
        options: dict,
        mode: str,
        on_forward: Callable[[Any], None] | None,
        index,
    ):
        scale = options["scale"]
        y = x * w * scale * mask
        summed = y.sum(dim) if mode == "sum" else y.mean(dim)
        if on_forward is not None:
            on_forward(y)
        ctx.save_for_backward(x, w, mask, index)
        ctx.dim, ctx.scale, ctx.mode, ctx.size = dim, scale, mode, summed.shape[0]
        return y, summed.index_select(0, index), index.clone()

    @classmethod
    def backward(cls, ctx, grad_y, grad_picked, _grad_index):
        x, w, mask, index = ctx.saved_tensors
        summed = torch.zeros(ctx.size, dtype=grad_picked.dtype).index_add_(0, index, grad_picked)
        if ctx.mode == "mean":
            summed = summed / x.shape[ctx.dim]
        total = grad_y + summed.unsqueeze(ctx.dim)
        local = total * ctx.scale * mask
        return local * w, None, None, local * x, None, None, None, None, None, None

    @staticmethod
    def gradcheck_inputs(dtype=torch.float64, generator=None):
        """x and w differentiable; mask and index are integer/bool tensors, the rest constants."""
        x = torch.randn(4, 5, generator=generator, dtype=torch.float64).to(dtype)
        w = torch.randn(4, 5, generator=generator, dtype=torch.float64).to(dtype)
        mask = torch.rand(4, 5, generator=generator) > 0.3
        index = torch.tensor([0, 2, 3, 2])
        return (
            x.requires_grad_(),
            1,
            mask,
            w.requires_grad_(),
            {"scale": 2.0},
            "sum",
            lambda y: None,
            index,
        )


class SinWithJvp(torch.autograd.Function):
    """Correct sin with both backward and a forward-mode jvp."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        ctx.save_for_forward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * x.cos()

    @staticmethod
    def jvp(ctx, x_t):
        (x,) = ctx.saved_tensors
        return x_t * x.cos()


class SquareMissingFactor(torch.autograd.Function):
    """Bug (constant-factor): d(x^2)/dx is 2x; backward returns grad * x, half of it."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * x


class SinWrongSign(torch.autograd.Function):
    """Bug (sign-flip): d sin(x)/dx is cos(x); backward returns -cos(x)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return -grad_output * x.cos()


class MulNoneGrad(torch.autograd.Function):
    """Bug (none-grad): x * w, but backward returns None for w."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, grad_output):
        _x, w = ctx.saved_tensors
        return grad_output * w, None


def detached_tanh(x):
    """Bug (zero-grad): a plain function that detaches its input, so no gradient flows."""
    return torch.tanh(x.detach()) * 2


class MulSwappedGrads(torch.autograd.Function):
    """Bug (wrong-order): x * y, but backward returns (grad * x, grad * y), swapped."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y

    @staticmethod
    def backward(ctx, grad_output):
        x, y = ctx.saved_tensors
        return grad_output * x, grad_output * y


class MatMulTransposedGrad(torch.autograd.Function):
    """Bug (transposed): a @ b; the gradient of b is returned transposed (g^T a, not a^T g)."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        return grad_output @ b.t(), (a.t() @ grad_output).t()


class ELUWrongBranch(torch.autograd.Function):
    """Bug (masked): ELU's backward switches branch at x > 1 instead of x > 0, so the
    gradient is wrong for 0 < x <= 1 only."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.where(x > 0, x, torch.expm1(x))

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return torch.where(x > 1, grad_output, grad_output * x.exp())


class ScaleIgnoresGradOutput(torch.autograd.Function):
    """Bug (not-scaled-by-grad-output): 3 * x, but backward returns 3 without grad_output."""

    @staticmethod
    def forward(ctx, x):
        ctx.shape = x.shape
        return 3 * x

    @staticmethod
    def backward(ctx, grad_output):
        return torch.full(ctx.shape, 3.0, dtype=grad_output.dtype)


class PowerTooFewGrads(torch.autograd.Function):
    """Bug (wrong-grad-count): forward(x, power) takes two arguments, backward returns one."""

    @staticmethod
    def forward(ctx, x, power: int = 3):
        ctx.save_for_backward(x)
        ctx.power = power
        return x**power

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return (grad_output * ctx.power * x ** (ctx.power - 1),)

    @staticmethod
    def gradcheck_inputs(dtype=torch.float64, generator=None):
        return torch.randn(3, generator=generator, dtype=dtype, requires_grad=True), 3


class BackwardRaises(torch.autograd.Function):
    """Bug (backward-error): backward indexes saved_tensors past its end."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.exp()

    @staticmethod
    def backward(ctx, grad_output):
        _x, y = ctx.saved_tensors
        return grad_output * y


class ExpSavedThenModified(torch.autograd.Function):
    """Bug (inplace-saved): saves exp(x), then adds 1 to that same tensor in place, so
    backward multiplies by exp(x) + 1 instead of exp(x)."""

    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        y.add_(1)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output * y


class SinWrongJvp(torch.autograd.Function):
    """Bug (forward-mode sign-flip): backward is right, jvp returns -cos(x) * t."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        ctx.save_for_forward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * x.cos()

    @staticmethod
    def jvp(ctx, x_t):
        (x,) = ctx.saved_tensors
        return -x_t * x.cos()


class SquareOnceDifferentiable(torch.autograd.Function):
    """First order right; @once_differentiable, so --second-order cannot run (an error)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return 2 * x * grad_output


class SquareDetachedBackward(torch.autograd.Function):
    """Bug (second order, zero-grad): backward uses x.detach(), so its own gradient w.r.t. x
    is lost; first order is right, --second-order catches it."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return 2 * x.detach() * grad_output


class ScaledSoftmax(torch.autograd.Function):
    """Correct, with trailing defaults that backward reads through ctx.needs_input_grad
    (as entmax does): it must be called as apply(x, temperature, dim), never apply(x)."""

    @staticmethod
    def forward(ctx, x, temperature=2.0, dim=-1):
        y = torch.softmax(x / temperature, dim)
        ctx.save_for_backward(y)
        ctx.temperature, ctx.dim = temperature, dim
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        inner = grad_output - (grad_output * y).sum(ctx.dim, keepdim=True)
        d_temperature = None if not ctx.needs_input_grad[1] else torch.zeros(())
        return y * inner / ctx.temperature, d_temperature, None


class SqrtAtZero(torch.autograd.Function):
    """Correct sqrt; not differentiable at 0, where a check must say so rather than blame
    backward: `--tensor x=[0.0,1.0,4.0]` fails (as torch's does), `--domain positive` passes."""

    @staticmethod
    def forward(ctx, x):
        y = x.sqrt()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output / (2 * y)


class ReflectSmoothZeroPadGrad(torch.autograd.Function):
    """Bug (boundary): forward smooths the last dim with a [1, 2, 1] / 4 kernel over a
    reflect-padded signal; backward differentiates a zero-padded one, so only the edges
    of the gradient are wrong."""

    KERNEL = (0.25, 0.5, 0.25)

    @staticmethod
    def _smooth(x, mode):
        k = torch.tensor(ReflectSmoothZeroPadGrad.KERNEL, dtype=x.dtype).view(1, 1, 3)
        flat = x.reshape(-1, 1, x.shape[-1])
        padded = torch.nn.functional.pad(flat, (1, 1), mode=mode)
        return torch.nn.functional.conv1d(padded, k).reshape(x.shape)

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ReflectSmoothZeroPadGrad._smooth(x, "reflect")

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        with torch.enable_grad():
            leaf = x.detach().requires_grad_()
            y = ReflectSmoothZeroPadGrad._smooth(leaf, "constant")
            (grad,) = torch.autograd.grad(y, leaf, grad_output)
        return grad

    @staticmethod
    def gradcheck_inputs(dtype=torch.float64, generator=None):
        return (
            torch.randn(2, 16, generator=generator, dtype=torch.float64).to(dtype).requires_grad_()
        )


class CumsumOffByOne(torch.autograd.Function):
    """Bug (index-shift): y = cumsum(x); backward's reversed cumsum starts one position late,
    so grad[i] gets the sum over j > i instead of j >= i."""

    @staticmethod
    def forward(ctx, x):
        return x.cumsum(-1)

    @staticmethod
    def backward(ctx, grad_output):
        total = grad_output.flip(-1).cumsum(-1).flip(-1)
        return torch.cat([total[..., 1:], torch.zeros_like(total[..., :1])], -1)


class _KeepForBackward(torch.autograd.Function):
    """A helper Function applied inside another's forward: its ctx is thrown away."""

    @staticmethod
    def forward(ctx, t):
        ctx.save_for_backward(t)
        return t.sum()

    @staticmethod
    def backward(ctx, grad_output):
        (t,) = ctx.saved_tensors
        return grad_output.expand_as(t)


class ExpScaledAfterNestedSave(torch.autograd.Function):
    """Correct, as entmax's loss Functions: a nested Function saves exp(x), forward then
    doubles it in place and saves it itself afterwards; backward uses 2 exp(x). No
    in-place warning applies: the nested save never reaches a backward."""

    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        _KeepForBackward.apply(y)
        y.mul_(2)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output * y
