"""GS465: labels copied from padded input ids with the padding left in: the cross-entropy
is trained to predict the pad token (the embedding's padding_idx) where the model read
padding. Padding set to ignore_index is silent, and so is a pad token that is also EOS,
predicted once at each row's real end, and an unpadded batch."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import gradscope
from gradscope.findings import Severity

PAD, EOS, VOCAB = 0, 1, 24


class TinyLM(nn.Module):
    def __init__(self, padding_idx: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 16, padding_idx=padding_idx)
        self.head = nn.Linear(16, VOCAB)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.embed(x)))


def _batch(pad: int, padded: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of 4-9 tokens ending in EOS, right padded to 12 with `pad`."""
    ids = torch.full((6, 12), pad)
    mask = torch.zeros(6, 12, dtype=torch.bool)
    for row in range(6):
        n = int(torch.randint(4, 10 if padded else 12, ())) if padded else 12
        ids[row, :n] = torch.randint(2, VOCAB, (n,))
        ids[row, n - 1] = EOS
        mask[row, :n] = True
    return ids, mask


def _train(case: str):
    torch.manual_seed(0)
    pad = EOS if case == "pad-is-eos" else PAD
    model = TinyLM(pad)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    with gradscope.watch() as w:
        for _ in range(6):
            ids, mask = _batch(pad, padded=case != "unpadded")
            labels = ids.clone()
            if case != "padding-kept":
                labels[~mask] = -100
            logits = model(ids)[:, :-1]
            loss = nn.functional.cross_entropy(
                logits.reshape(-1, VOCAB), labels[:, 1:].reshape(-1), ignore_index=-100
            )
            loss.backward()
            opt.step()
            opt.zero_grad()
    return w.report


def test_padding_kept_in_the_labels_is_named():
    report = _train("padding-kept")
    (found,) = [f for f in report.findings if f.rule == "GS465"]
    assert found.severity == Severity.WARNING and "pad token (id 0" in found.message
    assert "attention_mask == 0] = -100" in found.advice


@pytest.mark.parametrize("case", ["padding-ignored", "pad-is-eos", "unpadded"])
def test_padding_out_of_the_loss_is_silent(case):
    report = _train(case)
    assert [f for f in report.findings if f.severity >= Severity.WARNING] == [], [
        f.message for f in report.findings
    ]
