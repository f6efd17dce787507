"""Tensors that hold ±inf on purpose: a mask filled with float('-inf') (masked_fill, where,
full, an indexed assignment) and what is computed from them. Their infinities are values
the script chose, not a fault: the fault is the first op that makes NaN from them (-inf
times the 0 of a one-hot, -inf minus -inf, a softmax over a row masked whole). The live
watch of a step (script_live.py) asks, of each op, whether its outputs hold such values;
no host sync."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

WHOLE_ROW = ("softmax", "log_softmax", "logsumexp", "softmin", "scaled_dot_product_attention")
"""Ops that make NaN of a mask's -inf only where a row is masked whole."""
TIMES_ZERO = ("mul", "__mul__", "__rmul__", "prod", "matmul", "__matmul__", "mm", "bmm", "einsum")


def made_nan(op: str, made: str, fill: str | None) -> str:
    """The op (`made`: where) made NaN of inputs without NaN that held a mask's -inf
    (`fill`: where it was filled in): why, and the cure."""
    if op in WHOLE_ROW:
        why = "a row the mask filled whole has no softmax (-inf everywhere)"
        cure = "leave at least one entry of each row unmasked, or drop the rows masked whole"
    else:
        why = (
            "-inf times 0 (a one-hot or a weight of 0)"
            if op in TIMES_ZERO
            else "-inf times 0, or -inf minus -inf, is NaN"
        )
        cure = (
            "take the entries the mask allows (gather the chosen action's log-probability) "
            "or fill with a large finite negative (torch.finfo(dtype).min), not -inf"
        )
    return (
        f"first NaN made by {made} from inputs without NaN that held the -inf of a mask "
        f"(filled by {fill or 'the script'}): {why}; {cure}"
    )


REACHED_LOSS = (
    "the loss is non-finite through the -inf of a mask (filled by {fill}): no op made NaN; "
    "a sum or mean over masked entries (the log-probability of an action or token the mask "
    "forbids) reached the loss: take the entries the mask allows before reducing"
)


def _fills(args: Any, kwargs: Mapping[str, Any]) -> bool:
    """A non-finite Python number among the call's arguments (the fill value)."""
    stack: list[Any] = [args, list(kwargs.values())]
    while stack:
        v = stack.pop()
        if isinstance(v, float) and not math.isfinite(v):
            return True
        if isinstance(v, (tuple, list)):
            stack.extend(v)
    return False


PLAIN, FILLED, READS = 0, 1, 2
"""An op's outputs: no mask's infinities; infinities it filled in; what it read may hold them."""


class InfiniteFills:
    """id() of each tensor a mask's infinities reached, kept alive so their ids stay theirs,
    and the first op that filled them in."""

    def __init__(self) -> None:
        self.ids: set[int] = set()
        self.keep: list[torch.Tensor] = []
        self.first: Any = None
        """Where: a live watch's site, or a replay's text."""

    def note(
        self, name: str, call: tuple[Any, Mapping[str, Any]], tensors: tuple[list, list]
    ) -> int:
        """Whether the op's outputs may hold a mask's infinities: FILLED (it filled them in,
        its own input too when in place), READS (it read a tensor that may hold them), or
        PLAIN (0)."""
        inputs, outs = tensors
        filled = _fills(*call)
        if not filled and not any(id(t) in self.ids for t in inputs):
            return PLAIN
        reached = list(outs)
        if filled and inputs and (name.endswith("_") or name == "__setitem__"):
            reached.append(inputs[0])
        for t in reached:
            if id(t) not in self.ids:
                self.ids.add(id(t))
                self.keep.append(t)
        return FILLED if filled else READS

    def filled_at(self, site: Any, call: tuple[Any, Mapping[str, Any]]) -> None:
        """The script's op at `site` filled a mask with ±inf: the first one is named."""
        if self.first is None and _fills(*call):
            self.first = site


def made(out: torch.Tensor, inputs: list[torch.Tensor], state: int) -> torch.Tensor:
    """A device flag, set when the op made `out` bad: NaN/Inf (PLAIN); NaN alone where it
    filled a mask's -inf in (FILLED); NaN, or ±inf where none of its inputs held any
    (READS: a log of 0 after the mask's -inf was gone), where it read what a mask reached."""
    if state == PLAIN:
        return ~torch.isfinite(out).all()
    nan = torch.isnan(out).any()
    held = [torch.isinf(t).any().to(nan.device) for t in inputs]
    if state == FILLED:
        return nan
    inf = torch.isinf(out).any()
    return nan | (inf & ~torch.stack(held).any()) if held else nan | inf


def flags(
    outs: list[torch.Tensor], inputs: list[torch.Tensor], state: int
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Device flags of an op's outputs: any made bad (`made`); any NaN made of a mask's -inf
    (`of_mask`: what the sentence names), else None. No host sync."""
    made_ = [made(t, inputs, state) for t in outs]
    bad = made_[0] if len(made_) == 1 else torch.stack([f.to(made_[0].device) for f in made_]).any()
    if state == PLAIN:
        return bad, None
    return bad, of_mask(outs, inputs, state).to(bad.device)


def of_mask(outs: list[torch.Tensor], inputs: list[torch.Tensor], state: int) -> torch.Tensor:
    """A device flag: the op made NaN of a mask's -inf, which it filled in (FILLED) or read
    from an input that holds it now (READS). A NaN from inputs the mask's -inf has left (a
    gather of the allowed entries, then 0/0 of a weight at t = 0) is no mask's doing."""
    nan = torch.stack([torch.isnan(t).any() for t in outs]).any()
    if state == FILLED:
        return nan
    held = [torch.isinf(t).any().to(nan.device) for t in inputs]
    return nan & torch.stack(held).any() if held else torch.zeros_like(nan)


def came_bad(t: torch.Tensor, state: int) -> torch.Tensor:
    """A device flag: an input already bad (NaN where a mask's -inf may be in it)."""
    return ~torch.isfinite(t).all() if state == PLAIN else torch.isnan(t).any()
