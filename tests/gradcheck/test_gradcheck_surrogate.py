"""A spiking neuron's surrogate gradient: a Heaviside step in the forward, a fast-sigmoid
derivative in the backward (snnTorch, SpikingJelly, Norse). Finite differences of a step are
0 wherever they are defined, so gradcheck failed every healthy surrogate as a spurious
gradient (GS201). An output whose every value is a whole number is a step function: the
pair is noted as not checkable and the target passes. A continuous output that does not
depend on the input, with a gradient for it, is still a spurious gradient; a surrogate
that ignores grad_output still fails."""

from __future__ import annotations

import pytest
import torch

from gradscope.gradcheck import check


def _mem() -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    return torch.randn(4, 4, generator=gen, dtype=torch.float64).requires_grad_()


class FastSigmoidSpike(torch.autograd.Function):
    @staticmethod
    def forward(ctx, mem):
        ctx.save_for_backward(mem)
        return (mem > 0).to(mem.dtype)

    @staticmethod
    def backward(ctx, grad):
        (mem,) = ctx.saved_tensors
        return grad / (25 * mem.abs() + 1) ** 2


class SurrogateIgnoringGrad(FastSigmoidSpike):
    @staticmethod
    def backward(ctx, grad):
        (mem,) = ctx.saved_tensors
        return 1 / (25 * mem.abs() + 1) ** 2 + 0 * grad


class StrayTerm(torch.autograd.Function):
    """An output that ignores its input (0.37, or 0: whole, but no step), with a gradient
    for it all the same."""

    @staticmethod
    def forward(ctx, mem, continuous):
        ctx.save_for_backward(mem)
        ctx.continuous = continuous
        return torch.full_like(mem, 0.37) if ctx.continuous else torch.zeros_like(mem)

    @staticmethod
    def backward(ctx, grad):
        (mem,) = ctx.saved_tensors
        return grad / (25 * mem.abs() + 1) ** 2, None


def test_a_surrogate_gradient_is_noted_not_failed():
    result = check(FastSigmoidSpike, inputs=(_mem(),))
    assert result.passed and not result.failures, result.failures
    assert [n.slug for n in result.notes] == ["surrogate-grad"]


def test_a_surrogate_that_ignores_grad_output_still_fails():
    result = check(SurrogateIgnoringGrad, inputs=(_mem(),))
    assert [f.diagnosis.slug for f in result.failures] == ["not-scaled-by-grad-output"]


@pytest.mark.parametrize("continuous", [True, False])
def test_an_output_without_a_step_with_a_stray_gradient_is_still_spurious(continuous):
    result = check(StrayTerm, inputs=(_mem(), continuous))
    assert [f.diagnosis.slug for f in result.failures] == ["spurious-grad"]
