"""A module that binds torch.nn.functional's functions to names when it is imported, before
any watch starts (test_logit_probe.py)."""

import torch
from torch.nn.functional import cross_entropy
from torch.nn.functional import scaled_dot_product_attention as sdpa


def attention_loss(q: torch.Tensor, k: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return cross_entropy(sdpa(q, k, k).flatten(0, 2), y)
