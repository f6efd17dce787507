"""Whether a cross-entropy is trained to predict padding where its model read padding: the
labels built as a copy of the input ids with the padding left in (not set to
ignore_index), so every padded position asks the model for the pad token.

An nn.Embedding's padding_idx (Hugging Face sets it to the config's pad_token_id) says which
id is padding; EmbeddingBackward0 keeps it beside the ids read. A position counts where the
embedding read that id and the target there, not ignored, is that same id: padding after
padding. A row's one real end-of-sequence target (a pad token that is also EOS) is read
where the last real token was, not padding, and is not counted.
"""

from __future__ import annotations

from typing import Any

import torch

from gradscope.autograd_walk import saved


def padded_targets(
    direct: list[Any], target: torch.Tensor, counted: torch.Tensor
) -> tuple[int, torch.Tensor] | None:
    """(padding_idx, device [padded positions, counted positions]) of the first embedding the
    loss reaches directly that has a padding_idx and read as many ids as there are targets
    (or one more per row: the logits' last position cut off to shift by hand)."""
    for embedding in direct:
        pad = int(saved(embedding, "_saved_padding_idx", -1))
        ids = saved(embedding, "_saved_indices", None)
        if pad < 0 or pad >= 1 << 62 or not isinstance(ids, torch.Tensor):
            continue
        ids = _aligned(ids, target)
        if ids is None or ids.device != target.device:
            continue
        i, t, c = ids.reshape(-1), target.reshape(-1), counted.reshape(-1)
        both = (i == pad) & (t == pad) & c
        return pad, torch.stack([both.sum(), c.sum()])
    return None


def _aligned(ids: torch.Tensor, target: torch.Tensor) -> torch.Tensor | None:
    """The ids read at the targets' positions: all of them (Hugging Face pads the shifted
    labels), or all but each row's last (`logits[:, :-1]` against `labels[:, 1:]`)."""
    if ids.numel() == target.numel():
        return ids
    if ids.dim() == 2 and ids.shape[1] > 1 and target.numel() == ids.shape[0] * (ids.shape[1] - 1):
        return ids[:, :-1]
    return None


def read_padded(
    pads: list[tuple[int, int, torch.Tensor]],
) -> tuple[tuple[tuple[int, int, int], ...], int]:
    """The reads' (step, padded, counted), one read back, and the padding id."""
    if not pads:
        return (), -1
    device = pads[0][2].device
    counts = torch.stack([c.to(device) for _, _, c in pads]).tolist()
    reads = tuple((s, int(n), int(m)) for (s, _, _), (n, m) in zip(pads, counts, strict=True))
    return reads, pads[0][1]
