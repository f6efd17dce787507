"""How many samples one micro-batch holds, read by what the model's modules say.

The model's first tensor argument is batch-first by default: its dim 0. But an RNN, LSTM
or GRU and a MultiheadAttention (inside every nn.Transformer* layer) built with
`batch_first=False` take `[T, B, ...]`: their dim 1 is the batch, whatever the model
was given. So a forward pre-hook on each such module reads its own input's batch; where
it differs from the model input's dim 0 (a word-level LM fed `[T, B]` token ids), the
module's is the batch. Where such modules disagree with each other, the batch is not
read at all: a number of samples is stated only where the run had it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from gradscope.steps.noise import UNREAD

STATED = "stated by --batch-size"
MODEL_DIM_0 = "read as dim 0 of the model's input"


@dataclass(frozen=True)
class Seen:
    """One sequence-first module's batch, as its own input shows it."""

    label: str
    """`rnn` (LSTM, batch_first=False)"""
    size: int
    unbatched: bool = False


def sequence_first(root: nn.Module) -> list[tuple[str, nn.Module]]:
    """The modules of `root` whose input is [T, B, ...]: RNNs and attention built with
    batch_first=False (the nn.Transformer* layers' self_attn among them)."""
    return [
        (name, m)
        for name, m in root.named_modules()
        if isinstance(m, (nn.RNNBase, nn.MultiheadAttention))
        and not getattr(m, "batch_first", False)
    ]


def label_of(name: str, module: nn.Module) -> str:
    """How the line names a sequence-first module (made once, when it is hooked)."""
    return f"`{name or 'the model'}` ({type(module).__name__}, batch_first=False)"


def seen(label: str, args: Any, kwargs: Any) -> Seen | None:
    """The batch the module `label` names is about to run on: dim 1 of its first input (a
    PackedSequence's first batch size; 1 for an unbatched input); None where it has none."""
    first = next(iter((*args, *kwargs.values())), None)
    if isinstance(first, nn.utils.rnn.PackedSequence):
        return Seen(label, int(first.batch_sizes[0]))
    if not isinstance(first, torch.Tensor) or first.dim() < 2:
        return None
    if first.dim() == 2:  # an RNN's or attention's unbatched [T, F]
        return Seen(label, 1, unbatched=True)
    return Seen(label, int(first.shape[1]))


def reading(
    stated: int | None, model_dim0: int | None, modules: Iterable[Seen]
) -> tuple[int | None, str | None]:
    """(samples per micro-batch, how they were read, or why they could not be: UNREAD
    first); (None, None) where nothing was seen at all."""
    if stated:
        return stated, STATED
    found = list(dict.fromkeys(modules))
    sizes = {s.size for s in found}
    if len(sizes) > 1:
        each = ", ".join(f"{s.label} sees {s.size}" for s in found)
        return None, f"{UNREAD}: the sequence-first modules disagree ({each})"
    if not found:
        return (model_dim0, MODEL_DIM_0) if model_dim0 is not None else (None, None)
    one = found[0]
    if one.size == model_dim0:  # the model transposed a batch-first input itself
        return model_dim0, MODEL_DIM_0
    if one.unbatched:
        return 1, f"read from the unbatched input of {one.label}"
    return one.size, f"read as dim 1 of the input of {one.label}"
