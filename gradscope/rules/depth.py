"""What the vanishing rule (GS105) may compare: gradients that mean the same thing.

Two structures make a gradient small without the signal fading on its way back:

- a factor of a low-rank product `W = B @ A` (LoRA, a factorised linear map): the
  gradient of A is `B.T @ dL/dW`, so it is as small as B is. LoRA initialises B to zero,
  so A's gradient is zero at step 1 and tiny for the first steps after. The gradient
  reaching the product is read on the factor whose partner is the larger one (B, while
  B is near zero); the other factor's is the partner's size, not the signal's.
- tensors of different roles: a query projection's gradient at initialisation is small by
  the attention's design (near-uniform softmax), a classifier head's is large. Comparing
  the first layer run with the last says nothing about depth when the two are different
  kinds of tensor; the first block's query compared with the last block's query does.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from gradscope.stats import ParamStats


def gated_factors(params: Sequence[ParamStats]) -> set[str]:
    """Names of the factors of low-rank products whose gradient passes through a partner
    with a smaller weight (LoRA's A while B is zero or just moved from zero).

    A pair: two tensors whose names differ in one segment that is not a block index
    (`lora_A`/`lora_B`, `lora_down`/`lora_up`), chained shapes (A is r x in, B is out x r
    with r below both), and B run right after A where the order is known (or both held by
    one module). Found by grouping names with one segment left out: linear in the model."""
    groups: dict[tuple[str, ...], list[ParamStats]] = {}
    for p in params:
        if len(p.shape) >= 2 and p.requires_grad:
            parts = p.name.split(".")
            for i, part in enumerate(parts):
                if not part.isdigit():
                    groups.setdefault((str(i), *parts[:i], *parts[i + 1 :]), []).append(p)
    out = set()
    for group in groups.values():
        for a in group if len(group) > 1 else ():
            for b in group:
                if b is not a and _chained(a, b) and b.weight_norm < a.weight_norm:
                    out.add(a.name)
    return out


def _chained(a: ParamStats, b: ParamStats) -> bool:
    """B @ A: A's rows are B's columns, fewer than either outer size; run one after the
    other."""
    rank = a.shape[0]
    if b.shape[1] != rank or not rank < min(b.shape[0], math.prod(a.shape[1:])):
        return False
    if a.module == b.module or a.depth is None or b.depth is None:
        return True
    return b.depth == a.depth + 1


_INDEX = re.compile(r"(^|\.)\d+(?=\.|$)")


def role(module: str) -> str:
    """A module's name with its block indices taken out: `layer.0.attention.self.query` and
    `layer.3.attention.self.query` have one role."""
    return _INDEX.sub(r"\1#", module)


def same_role_last(first: str, ordered: Sequence[ParamStats]) -> list[ParamStats]:
    """The parameters of the last module run with the role of module `first`, when that is
    a later module than `first` (else empty: the role does not repeat). `ordered`: by depth."""
    kind = role(first)
    later = [p for p in ordered if p.module != first and role(p.module) == kind]
    if not later:
        return []
    deepest = later[-1].depth
    return [p for p in later if p.depth == deepest]
