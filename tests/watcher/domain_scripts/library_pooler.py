"""A BERT encoder whose pooler runs and never reaches the loss, built from config (no
download). `encoder-decoder`: transformers' EncoderDecoderModel over a BertModel encoder
keeps the encoder's last_hidden_state and drops its pooler_output (as sentence-
transformers' models.Transformer does under mean pooling): the library drops it. Bugs the
script makes itself: `logits-dropped` (BertForSequenceClassification's loss taken on its
hidden states: the classifier it returned never learns), `own-wrapper` (the script's own
module mean-pools last_hidden_state and drops the pooler)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    BertLMHeadModel,
    BertModel,
    EncoderDecoderModel,
)

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "encoder-decoder"
V = 40
cfg = BertConfig(
    vocab_size=V,
    hidden_size=16,
    num_hidden_layers=1,
    num_attention_heads=2,
    intermediate_size=32,
    max_position_embeddings=16,
)


class MeanPooled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.bert = BertModel(cfg)
        self.head = nn.Linear(16, 1)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.bert(ids).last_hidden_state.mean(1))


if MODE == "encoder-decoder":
    dec = BertConfig(**{**cfg.to_dict(), "is_decoder": True, "add_cross_attention": True})
    model: nn.Module = EncoderDecoderModel(encoder=BertModel(cfg), decoder=BertLMHeadModel(dec))
    model.config.decoder_start_token_id = 1
    model.config.pad_token_id = 0
elif MODE == "logits-dropped":
    model = BertForSequenceClassification(BertConfig(**{**cfg.to_dict(), "num_labels": 2}))
else:
    model = MeanPooled()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for _ in range(4):
    ids = torch.randint(2, V, (4, 6))
    if MODE == "encoder-decoder":
        loss = model(input_ids=ids, labels=ids.flip(1)).loss
    elif MODE == "logits-dropped":
        out = model(ids, output_hidden_states=True)
        loss = F.mse_loss(out.hidden_states[-1].mean(1)[:, 0], (ids < 20).float().mean(1))
    else:
        loss = F.mse_loss(model(ids)[:, 0], (ids < 20).float().mean(1))
    loss.backward()
    opt.step()
    opt.zero_grad()
