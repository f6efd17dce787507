"""GS445: a cross-entropy's targets fed to the model at the positions they are predicted at
(teacher forcing without the shift), told from the graph: the NLL node's target against the
ids each embedding read. Its look-alikes stay silent: the same models shifted, a masked LM,
a denoising autoencoder, a copy task, autoencoders through a bottleneck."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from gradscope.watcher.target_leak import TargetLeak
from tests.watcher.watch_scripts import domain_watched

SCRIPT = "target_shift.py"
V, T, B = 16, 8, 4


def leak_facts(loss_of, steps=(1, 2, 3)):
    """TargetLeak fed the loss of each step, then its facts."""
    leak = TargetLeak()
    for step in steps:
        leak.observe(loss_of(step), step)
    return leak.facts()


def data(step):
    gen = torch.Generator().manual_seed(step)
    return torch.randint(1, V, (B, T + 1), generator=gen)


class TokenMLP(nn.Module):
    """Position-wise: an embedding and a head, with a pooled code added where asked."""

    def __init__(self, pooled=False):
        super().__init__()
        self.emb, self.head, self.pooled = nn.Embedding(V + 1, 8), nn.Linear(8, V + 1), pooled

    def forward(self, x):
        h = self.emb(x)
        if self.pooled:  # the code alone reaches the head: the mean over positions
            h = h.mean(1, keepdim=True).expand(-1, x.shape[1], -1)
        return self.head(torch.tanh(h))


class FlatAutoencoder(nn.Module):
    """An MLP over the whole sequence: positions and features flattened into a code of 6."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V + 1, 8)
        self.code = nn.Sequential(nn.Flatten(), nn.Linear(T * 8, 6), nn.Tanh())
        self.out = nn.Linear(6, T * (V + 1))

    def forward(self, x):
        return self.out(self.code(self.emb(x))).view(x.shape[0], x.shape[1], V + 1)


def ce(logits, target):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))


def test_the_targets_fed_at_their_own_positions_are_copies_and_shifted_ones_are_not():
    torch.manual_seed(0)
    model = TokenMLP()
    (copied,) = leak_facts(lambda s: ce(model(data(s)[:, :-1]), data(s)[:, :-1]))
    assert copied.reads == copied.copied == (1, 2, 3) and copied.table == "17×8"
    (shifted,) = leak_facts(lambda s: ce(model(data(s)[:, :-1]), data(s)[:, 1:]))
    assert shifted.reads == (1, 2, 3) and shifted.copied == ()


def test_masked_and_ignored_positions_and_a_bottleneck_are_no_copy():
    torch.manual_seed(0)
    model = TokenMLP()

    def masked(step):
        x = data(step)[:, :-1]
        keep = torch.arange(T) % 4 != 0  # a quarter masked: labels -100 elsewhere
        return ce(model(x.masked_fill(~keep, V)), x.masked_fill(keep, -100))

    (mlm,) = leak_facts(masked)
    assert mlm.reads and mlm.copied == ()

    def ignored(step):  # the positions that count hold the same ids: still a copy
        x = data(step)[:, :-1]
        return ce(model(x), x.masked_fill(torch.arange(T) % 4 == 0, -100))

    (partial,) = leak_facts(ignored)
    assert partial.copied == partial.reads
    pooled = TokenMLP(pooled=True)
    assert leak_facts(lambda s: ce(pooled(data(s)[:, :-1]), data(s)[:, :-1])) == []
    flat = FlatAutoencoder()
    assert leak_facts(lambda s: ce(flat(data(s)[:, :-1]), data(s)[:, :-1])) == []


def gathered_nll(logits, target, weight=None):
    """A cross-entropy written by hand: the log-probabilities gathered by the targets, each
    position weighted (a masked diffusion's 1/t on its masked positions)."""
    nll = -logits.log_softmax(-1).gather(-1, target[..., None]).squeeze(-1)
    return (nll if weight is None else nll * weight).mean()


def test_a_hand_written_cross_entropy_reads_its_targets_from_the_gather():
    """MDLM, SEDD and D3PM gather the log-probabilities by the clean tokens: a denoiser fed
    those clean tokens copies them; fed the masked ones (x_t) it does not, nor does a
    policy gradient over the next tokens (shifted), nor a gather that picks whole rows."""
    torch.manual_seed(0)
    model = TokenMLP()

    def x_t(step):
        x = data(step)[:, :-1]
        return x, x.masked_fill(torch.arange(T) % 3 == 0, V)

    def denoiser(fed_clean):
        def loss(step):
            x0, xt = x_t(step)
            return gathered_nll(model(x0 if fed_clean else xt), x0, (xt == V).float())

        return loss

    (leak,) = leak_facts(denoiser(fed_clean=True))
    assert leak.copied == leak.reads == (1, 2, 3)
    (masked,) = leak_facts(denoiser(fed_clean=False))
    assert masked.reads == (1, 2, 3) and masked.copied == ()
    (shifted,) = leak_facts(lambda s: gathered_nll(model(data(s)[:, :-1]), data(s)[:, 1:]))
    assert shifted.copied == () and shifted.shifted == (1, 2, 3)

    def rows(step):  # a gather along the positions, not the classes: no targets
        x = data(step)[:, :-1]
        picked = model(x).gather(1, x[:, :, None].expand(-1, -1, V + 1) % T)
        return picked.logsumexp(-1).mean()

    assert leak_facts(rows) == []


def test_a_reader_of_the_shifted_targets_is_recorded():
    """A seq2seq autoencoder: the encoder reads x, the decoder BOS + x[:-1] (teacher forced)."""
    torch.manual_seed(0)
    enc, dec = TokenMLP(), TokenMLP()

    def autoencoder(step):
        x = data(step)[:, 1:]
        fed = torch.cat([torch.zeros_like(x[:, :1]), x[:, :-1]], 1)
        return ce(enc(x) + dec(fed), x)

    (facts,) = leak_facts(autoencoder)
    assert facts.copied == facts.shifted == (1, 2, 3)

    def sequence_first(step):  # (T, B), as torch's word-language model lays a batch out
        x = data(step)[:, 1:].t()
        fed = torch.cat([torch.zeros_like(x[:1]), x[:-1]], 0)
        return ce(enc(x) + dec(fed), x)

    (facts,) = leak_facts(sequence_first)
    assert facts.copied == facts.shifted == (1, 2, 3)


def gs445(mode):
    return [f for f in domain_watched(SCRIPT, mode).findings if f.rule == "GS445"]


def test_an_unshifted_captioning_decoder_is_named_at_its_reads():
    (found,) = [f for f in domain_watched(SCRIPT, "caption-leak").findings if f.rule == "GS445"]
    assert "the token ids the model's nn.Embedding (24×32) read" in found.message
    assert "1, 2, 3, 25, 26" in found.message and "shift the targets" in found.advice
    assert found.steps == (1, 2)
    assert gs445("caption") == []


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["gpt-leak", "seq2seq-leak"])
def test_an_unshifted_lm_and_seq2seq_decoder_are_named(mode):
    (found,) = gs445(mode)
    assert "teacher forcing without the shift" in found.message


@pytest.mark.slow
@pytest.mark.parametrize(
    "mode", ["gpt", "seq2seq", "seq2seq_ae", "mlm", "denoise", "copy", "lstm_ae", "lstm_ae_state"]
)
def test_shifted_masked_denoising_copy_and_bottlenecked_models_are_silent(mode):
    assert gs445(mode) == []
