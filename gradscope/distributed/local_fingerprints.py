"""This rank's fingerprints of its tensors, measured where they live (a DTensor's local part):
the sum and L2 of each weight or buffer, and the square, sum and L2 of each gradient, as
float64 rows of the payload fingerprint.py compares across ranks."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from gradscope.distributed.norms import local
from gradscope.distributed.payload import GradColumn


def weight_fingerprints(tensors: list[Any]) -> torch.Tensor:
    """[n, 2] float64: sum and L2 of each tensor's local part."""
    out = torch.zeros(len(tensors), 2, dtype=torch.float64)
    with torch.no_grad():
        for i, t in enumerate(tensors):
            x = local(t).detach().double()
            out[i, 0], out[i, 1] = x.sum(), x.norm()  # ParamColumn.WEIGHT_SUM, WEIGHT_L2
    return out


def grad_fingerprints(params: list[nn.Parameter] | list[None]) -> torch.Tensor:
    """[n, len(GradColumn)] float64: each local grad part's square, sum and L2; no grad:
    NaN, but -1 as the square (a NaN square is a non-finite gradient)."""
    out = torch.full((len(params), len(GradColumn)), math.nan, dtype=torch.float64)
    with torch.no_grad():
        for i, p in enumerate(params):
            out[i, GradColumn.SQ] = -1.0
            if p is not None and p.grad is not None:
                g = local(p.grad).detach().double()
                norm = g.norm()
                out[i, GradColumn.SQ] = norm**2
                out[i, GradColumn.SUM], out[i, GradColumn.L2] = g.sum(), norm
    return out
