"""Custom autograd Functions on complex tensors, each written right and with the
conjugate forgotten (torch's gradient w.r.t. z is the conjugate Wirtinger derivative)."""

from __future__ import annotations

import torch


class ComplexMul(torch.autograd.Function):
    """y = w * z, elementwise: grad_z = g * conj(w), grad_w = g * conj(z)."""

    @staticmethod
    def forward(ctx, z, w):
        ctx.save_for_backward(z, w)
        return z * w

    @staticmethod
    def backward(ctx, g):
        z, w = ctx.saved_tensors
        return g * w.conj(), g * z.conj()


class ComplexMulNoConj(torch.autograd.Function):
    """ComplexMul whose backward returns g * w and g * z."""

    @staticmethod
    def forward(ctx, z, w):
        ctx.save_for_backward(z, w)
        return z * w

    @staticmethod
    def backward(ctx, g):
        z, w = ctx.saved_tensors
        return g * w, g * z


class ComplexMulFactor(torch.autograd.Function):
    """ComplexMul with an extra factor 2 on z's gradient: a wrong factor, conjugate right."""

    @staticmethod
    def forward(ctx, z, w):
        ctx.save_for_backward(z, w)
        return z * w

    @staticmethod
    def backward(ctx, g):
        z, w = ctx.saved_tensors
        return 2 * g * w.conj(), g * z.conj()


class SpectralMix(torch.autograd.Function):
    """An FNO spectral layer: y[b,o,m] = sum_i x[b,i,m] w[i,o,m] on the Fourier modes."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return torch.einsum("bim,iom->bom", x, w)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        gx = torch.einsum("bom,iom->bim", g, w.conj())
        return gx, torch.einsum("bom,bim->iom", g, x.conj())


class SpectralMixNoConj(torch.autograd.Function):
    """SpectralMix whose backward forgets both conjugates."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return torch.einsum("bim,iom->bom", x, w)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return torch.einsum("bom,iom->bim", g, w), torch.einsum("bom,bim->iom", g, x)


class Power(torch.autograd.Function):
    """|z|^2, a real output of a complex input: grad_z = 2 g z."""

    @staticmethod
    def forward(ctx, z):
        ctx.save_for_backward(z)
        return (z * z.conj()).real

    @staticmethod
    def backward(ctx, g):
        (z,) = ctx.saved_tensors
        return 2 * g * z


class PowerConj(Power):
    """Power whose backward returns 2 g conj(z): d|z|^2/dz (holomorphic-style) for grad_z."""

    @staticmethod
    def backward(ctx, g):
        (z,) = ctx.saved_tensors
        return 2 * g * z.conj()


class FFTConv(torch.autograd.Function):
    """A complex signal filtered in frequency: y = ifft(fft(x) * h), complex-linear in both
    (the adjoint of ifft is fft / n): grad_x = ifft(fft(g) * conj(h)) * n / n,
    grad_h = conj(X) * fft(g) / n."""

    @staticmethod
    def forward(ctx, x, h):
        spec = torch.fft.fft(x)
        ctx.save_for_backward(spec, h)
        return torch.fft.ifft(spec * h)

    @staticmethod
    def backward(ctx, g):
        spec, h = ctx.saved_tensors
        gy = torch.fft.fft(g) / g.shape[-1]
        return torch.fft.ifft(gy * h.conj()) * g.shape[-1], gy * spec.conj()


class FFTConvNoConj(FFTConv):
    """FFTConv whose backward uses h and X where their conjugates are due."""

    @staticmethod
    def backward(ctx, g):
        spec, h = ctx.saved_tensors
        gy = torch.fft.fft(g) / g.shape[-1]
        return torch.fft.ifft(gy * h) * g.shape[-1], gy * spec
