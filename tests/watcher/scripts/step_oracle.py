"""What the step scripts saw themselves, computed in float64 with plain torch, dumped as
JSON for the tests to compare with gradscope's records (an independent oracle)."""

import json
import math

import torch


def wide(t):
    """float64 (complex128 for complex) copy."""
    return t.detach().to(torch.complex128 if t.is_complex() else torch.float64)


def norm(t):
    """float64 L2 norm (complex: of the modulus); None for None."""
    if t is None:
        return None
    return float(torch.linalg.vector_norm(wide(t)))


def total(values):
    return math.sqrt(sum(v * v for v in values if v is not None))


def grads(named):
    """{name: norm of its gradient} for (name, parameter) pairs."""
    return {n: norm(p.grad) for n, p in named}


def weights(named):
    return {n: p.detach().clone() for n, p in named}


def update(before, named):
    """‖w_after - w_before‖ over all of them, float64."""
    return total([norm(wide(p) - wide(before[n])) for n, p in named])


def dump(path, steps, **extra):
    with open(path, "w") as f:
        json.dump({"steps": steps, **extra}, f)
