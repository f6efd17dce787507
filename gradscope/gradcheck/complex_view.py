"""Complex tensors checked as pairs of reals, and the conjugate a backward forgot.

A complex input `z` of shape S is checked as `torch.view_as_real(z)`, of shape S + (2,)
(the last index 0 for the real part, 1 for the imaginary one), and a complex output the
same way: every Jacobian is then a real one, measured and compared as any other, which is
what torch.autograd.gradcheck does for complex inputs too. Autograd's view_as_complex and
view_as_real carry torch's convention (a real loss's gradient w.r.t. z is dL/dRe z +
i dL/dIm z, the conjugate Wirtinger derivative) into that real Jacobian exactly, so a
backward that breaks the convention shows up as a plain mismatch.

A backward that forgets `.conj()` (grad · w where grad · conj(w) is due) returns the
conjugate of the right gradient of the conjugated cotangent: in the real Jacobian, every
entry that pairs one real and one imaginary part has the wrong sign (`conjugated`).
"""

from __future__ import annotations

from typing import Any

# torch is imported in functions: `gradscope --help` must not load it


def as_real(t: Any) -> Any:
    """A complex tensor's (re, im) view as a real tensor of its own (detached copy)."""
    import torch

    return torch.view_as_real(t.detach().resolve_conj()).clone()


def as_complex(t: Any) -> Any:
    """The complex tensor a real pair (last dim 2) stands for, differentiable through."""
    import torch

    if t.stride(-1) != 1 or any(s % 2 for s in t.stride()[:-1]):
        t = t.contiguous()
    return torch.view_as_complex(t)


def realified_output(t: Any) -> Any:
    """A complex output as its (re, im) pairs, differentiable; a real one as it is."""
    import torch

    return torch.view_as_real(t.resolve_conj()) if t.is_complex() else t


def differentiable(t: Any) -> bool:
    """A tensor gradcheck differentiates: floating point or complex."""
    return bool(t.is_floating_point() or t.is_complex())


def random_complex(shape: tuple[int, ...], gen: Any, dtype: Any, domain: Any = None) -> Any:
    """Standard complex normal draws (both parts from the generator, each mapped into the
    domain): a real-valued draw would hide a missing conjugate (conj(w) = w)."""
    import torch

    z = torch.randn((*shape, 2), generator=gen, dtype=torch.float64)
    if domain is not None:
        z = domain.sample(z)
    return torch.view_as_complex(z).to(dtype).requires_grad_()


def conjugation_signs(rows: Any, cols: Any, output_complex: bool, input_complex: bool) -> Any:
    """Per (row, col) of a real Jacobian block: -1 where conjugating the complex sides flips
    the entry's sign (one index on an imaginary part, the other on a real part), else 1."""
    import torch

    flips = torch.zeros(rows.shape, dtype=torch.long)
    if output_complex:
        flips = flips + rows % 2
    if input_complex:
        flips = flips + cols % 2
    return 1.0 - 2.0 * (flips % 2).double()
