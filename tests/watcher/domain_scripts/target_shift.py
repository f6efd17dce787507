"""Token models trained with cross-entropy, each fed its tokens the way practitioners write
it: a GPT-like LM, an LSTM captioning decoder, a seq2seq Transformer (inputs shifted by one
from the targets); a masked LM (15% masked, labels -100 elsewhere), a denoising autoencoder
on tokens, a copy task (its target is its input delayed), an LSTM autoencoder through its
final state (repeated, or as the decoder's initial state), a seq2seq autoencoder (its
decoder teacher-forced). The `*-leak` modes plant
teacher forcing without the shift: the model is fed the tokens it is trained to predict."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

mode = sys.argv[1] if len(sys.argv) > 1 else "gpt"
leak = mode.endswith("-leak")
kind = mode.removesuffix("-leak")
torch.manual_seed(0)
V, T, D, B, STEPS = 24, 12, 32, 8, 30


def tokens(n=B, t=T + 1):
    start = torch.randint(1, V, (n, 1))
    return (start + torch.arange(t) * torch.randint(1, 4, (n, 1))) % (V - 1) + 1


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok, self.pos = nn.Embedding(V, D), nn.Embedding(T + 1, D)
        layer = nn.TransformerEncoderLayer(D, 4, 64, dropout=0.0, batch_first=True)
        self.body, self.head = nn.TransformerEncoder(layer, 2), nn.Linear(D, V)

    def forward(self, x):
        t = x.shape[1]
        h = self.tok(x) + self.pos(torch.arange(t))
        mask = nn.Transformer.generate_square_subsequent_mask(t)
        return self.head(self.body(h, mask=mask, is_causal=True))


class Captioner(nn.Module):
    def __init__(self):
        super().__init__()
        self.img, self.emb = nn.Linear(16, D), nn.Embedding(V, D)
        self.lstm, self.head = nn.LSTM(D, D, batch_first=True), nn.Linear(D, V)

    def forward(self, image, caption):
        seq = torch.cat([self.img(image).unsqueeze(1), self.emb(caption)], 1)
        return self.head(self.lstm(seq)[0][:, 1:])


class Seq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.src, self.tgt = nn.Embedding(V, D), nn.Embedding(V, D)
        self.core = nn.Transformer(D, 4, 1, 1, 64, dropout=0.0, batch_first=True)
        self.head = nn.Linear(D, V)

    def forward(self, src, tgt_in):
        mask = nn.Transformer.generate_square_subsequent_mask(tgt_in.shape[1])
        return self.head(self.core(self.src(src), self.tgt(tgt_in), tgt_mask=mask))


class Bidirectional(nn.Module):
    """An encoder over every position (a masked LM's, a denoiser's, a copy task's)."""

    def __init__(self):
        super().__init__()
        self.tok, self.pos = nn.Embedding(V + 1, D), nn.Embedding(2 * T + 1, D)
        layer = nn.TransformerEncoderLayer(D, 4, 64, dropout=0.0, batch_first=True)
        self.body, self.head = nn.TransformerEncoder(layer, 1), nn.Linear(D, V + 1)

    def forward(self, x):
        return self.head(self.body(self.tok(x) + self.pos(torch.arange(x.shape[1]))))


class LSTMAutoencoder(nn.Module):
    """Encodes the sequence into its final state; the decoder unrolls from it alone."""

    def __init__(self):
        super().__init__()
        self.emb, self.enc = nn.Embedding(V, D), nn.LSTM(D, D, batch_first=True)
        self.dec, self.head = nn.LSTM(D, D, batch_first=True), nn.Linear(D, V)

    def forward(self, x):
        seq = self.emb(x)
        _, (h, c) = self.enc(seq)
        if kind == "lstm_ae_state":  # the decoder starts from the code, fed zeros
            return self.head(self.dec(torch.zeros_like(seq), (h, c))[0])
        code = h[-1].unsqueeze(1).repeat(1, x.shape[1], 1)
        return self.head(self.dec(code)[0])


def ce(logits, target, **kw):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1), **kw)


def batch_loss(model):
    data = tokens()
    if kind == "gpt":
        x, y = data[:, :-1], data[:, 1:]
        return ce(model(x), x if leak else y)
    if kind == "caption":
        image, caption = torch.randn(B, 16), data
        fed = caption[:, 1:] if leak else caption[:, :-1]
        return ce(model(image, fed), caption[:, 1:])
    if kind == "seq2seq":
        src, tgt = data[:, :-1], (data[:, :-1] + 5) % (V - 1) + 1
        tgt_in = tgt[:, 1:] if leak else tgt[:, :-1]
        return ce(model(src, tgt_in), tgt[:, 1:])
    if kind == "seq2seq_ae":  # reconstructs its source, its decoder fed BOS + x[:-1]
        x = data[:, 1:]
        return ce(model(x, torch.cat([torch.zeros_like(x[:, :1]), x[:, :-1]], 1)), x)
    if kind == "mlm":
        x = data[:, :-1]
        masked = torch.rand(x.shape) < 0.15
        masked[:, 0] = True
        return ce(model(x.masked_fill(masked, V)), x.masked_fill(~masked, -100))
    if kind == "denoise":
        x = data[:, :-1]
        noisy = torch.where(torch.rand(x.shape) < 0.2, torch.randint(1, V, x.shape), x)
        return ce(model(noisy), x)
    if kind == "copy":  # the sequence, a delimiter, then blanks while it is recalled
        x = data[:, :-1]
        fed = torch.cat([x, torch.full((B, 1), V), torch.zeros_like(x)], 1)
        target = torch.cat([torch.full((B, T + 1), -100), x], 1)
        return ce(model(fed), target)
    if kind in ("lstm_ae", "lstm_ae_state"):
        x = data[:, :-1]
        return ce(model(x), x)
    raise SystemExit(f"unknown mode {mode}")


MODELS = {"gpt": GPT, "caption": Captioner, "seq2seq": Seq2Seq, "seq2seq_ae": Seq2Seq}
model = MODELS.get(kind, LSTMAutoencoder if kind.startswith("lstm_ae") else Bidirectional)()
opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
for _ in range(STEPS):
    loss = batch_loss(model)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("loss", loss.item())
