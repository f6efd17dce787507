"""GS471: a next-token model whose attention sees later positions (a causal mask missing,
dropped or wrong), told from the mechanism: the share of attention on later keys at the
first steps, for an attention whose queries and keys come from a token lookup that read
the targets shifted by one. Its look-alikes stay silent: causal GPTs (is_causal, a tril
mask with -inf, -1e4 or -1e9), a masked LM, an encoder-decoder, a prefix LM and a
classifier over a bidirectional encoder."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import gradscope

V, D, T, B, H = 24, 16, 16, 4, 2
STEPS = 4


class Attention(nn.Module):
    """Multi-head self-attention written by hand, its mask by `mode`."""

    def __init__(self, mode: str, prefix: int = 0):
        super().__init__()
        self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.mode, self.prefix = mode, prefix
        self.register_buffer("tril", torch.tril(torch.ones(T + 1, T + 1)))

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = (z.view(b, t, H, D // H).transpose(1, 2) for z in self.qkv(x).split(D, 2))
        if self.mode.startswith("sdpa"):
            y = F.scaled_dot_product_attention(q, k, v, **self._sdpa(t))
        else:
            att = (q @ k.transpose(-2, -1)) * (D // H) ** -0.5
            att = self._masked(att, t).softmax(-1)
            y = att @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, D))

    def _sdpa(self, t):
        if self.mode == "sdpa-causal":
            return {"is_causal": True}
        if self.mode == "sdpa-prefix":  # bidirectional over the prefix, causal after it
            keep = torch.tril(torch.ones(t, t, dtype=torch.bool))
            keep[: self.prefix, : self.prefix] = True
            return {"attn_mask": keep}
        return {}

    def _masked(self, att, t):
        fills = {"tril": float("-inf"), "tril-1e4": -1e4, "tril-1e9": -1e9}
        if self.mode in fills:
            return att.masked_fill(self.tril[:t, :t] == 0, fills[self.mode])
        if self.mode == "ones":  # the mask built from torch.ones: nothing masked
            return att.masked_fill(torch.ones(t, t) == 0, float("-inf"))
        if self.mode == "triu":  # the upper triangle kept, the past masked
            return att.masked_fill(torch.triu(torch.ones(t, t)) == 0, float("-inf"))
        if self.mode == "offset":  # the mask sliced one row late: each query sees one more
            return att.masked_fill(self.tril[1 : t + 1, :t] == 0, float("-inf"))
        if self.mode == "left-padded":  # Hugging Face's eager mask: causal and no padding key
            keep = (self.tril[:t, :t] > 0) & (torch.arange(t) >= self.prefix)
            return att + (~keep) * torch.finfo(att.dtype).min
        return att  # the masked_fill line dropped


class GPT(nn.Module):
    def __init__(self, mode: str, prefix: int = 0):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, D), nn.Embedding(T, D)
        self.blocks = nn.ModuleList(Attention(mode, prefix) for _ in range(2))
        self.head = nn.Linear(D, V)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = x + block(x)
        return self.head(x)


class TorchLM(nn.Module):
    """nn.TransformerEncoder as a decoder-only LM, with or without its causal mask; or
    nn.MultiheadAttention called directly (its weights returned: its own softmax)."""

    def __init__(self, masked: bool, direct: bool = False):
        super().__init__()
        self.emb, self.head = nn.Embedding(V, D), nn.Linear(D, V)
        self.masked, self.direct = masked, direct
        layer = nn.TransformerEncoderLayer(D, H, 2 * D, dropout=0.0, batch_first=True)
        stack = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.body = nn.MultiheadAttention(D, H, batch_first=True) if direct else stack

    def forward(self, idx):
        x, t = self.emb(idx), idx.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(t) if self.masked else None
        if self.direct:
            return self.head(x + self.body(x, x, x, attn_mask=mask)[0])
        return self.head(self.body(x, mask=mask, is_causal=self.masked))


def watched(model, batch_of, loss_of=None) -> gradscope.watch:
    torch.manual_seed(0)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    loss_of = loss_of or (lambda out, y: F.cross_entropy(out.reshape(-1, V), y.reshape(-1)))
    with gradscope.watch() as w:
        for step in range(STEPS):
            args, y = batch_of(step)
            loss = loss_of(model(*args), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return w


def next_token(step):
    tokens = torch.randint(0, V, (B, T + 1), generator=torch.Generator().manual_seed(step))
    return (tokens[:, :-1],), tokens[:, 1:]


def gs470(w):
    return [f for f in w.report.findings if f.rule == "GS471"]


def read(w):
    return {f.module: f for f in w.run.state_facts.future_attended}


@pytest.mark.parametrize("mode", ["sdpa", "none", "ones", "triu", "offset"])
def test_a_gpt_whose_attention_sees_later_tokens_is_named(mode):
    torch.manual_seed(0)
    w = watched(GPT(mode), next_token)
    (found,) = [f for f in w.report.findings if f.rule == "GS471"]
    assert found.slug == "future-attended" and found.subject == "blocks.0"
    assert "of their attention on later positions" in found.message
    assert "is_causal=True" in found.advice and found.steps == (1, 2)
    assert found.value >= (0.1 if mode == "offset" else 0.4)
    assert "`blocks.1`" in found.evidence[-1]


@pytest.mark.parametrize("mode", ["sdpa-causal", "tril", "tril-1e4", "tril-1e9"])
def test_causal_gpts_are_read_and_silent(mode):
    torch.manual_seed(0)
    w = watched(GPT(mode), next_token)
    assert gs470(w) == []
    facts = read(w)
    assert set(facts) == {"blocks.0", "blocks.1"}
    assert all(f.next_token == f.reads == (1, 2, 3) and max(f.shares) == 0 for f in facts.values())


def test_torch_layers_used_as_a_decoder_without_a_mask_are_named():
    torch.manual_seed(0)
    (found,) = gs470(watched(TorchLM(masked=False), next_token))
    assert found.subject == "body.layers.0.self_attn"
    (direct,) = gs470(watched(TorchLM(masked=False, direct=True), next_token))
    assert direct.subject == "body"
    for healthy in (TorchLM(masked=True), TorchLM(masked=True, direct=True)):
        w = watched(healthy, next_token)
        assert gs470(w) == [] and read(w) and max(max(f.shares) for f in read(w).values()) == 0


def test_a_masked_lm_and_a_classifier_over_bidirectional_attention_are_silent():
    torch.manual_seed(0)

    def masked(step):
        (x,), _ = next_token(step)
        hidden = torch.rand(x.shape, generator=torch.Generator().manual_seed(step)) < 0.3
        return (x.masked_fill(hidden, V - 1),), x.masked_fill(~hidden, -100)

    w = watched(GPT("none"), masked)
    assert gs470(w) == [] and all(f.next_token == () for f in read(w).values())

    class Classifier(GPT):
        def forward(self, idx):
            return super().forward(idx).mean(1)

    def labels(step):
        (x,), _ = next_token(step)
        return (x,), x[:, 0] % 3

    w = watched(Classifier("none"), labels, F.cross_entropy)
    assert gs470(w) == [] and read(w) == {}


class Seq2Seq(nn.Module):
    """nn.Transformer: a bidirectional encoder over the source, a causal decoder over the
    shifted target; one embedding table for both where `shared`."""

    def __init__(self, shared: bool):
        super().__init__()
        self.src = nn.Embedding(V, D)
        self.tgt = self.src if shared else nn.Embedding(V, D)
        self.body = nn.Transformer(D, H, 1, 1, 2 * D, dropout=0.0, batch_first=True)
        self.head = nn.Linear(D, V)

    def forward(self, src, tgt):
        mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
        return self.head(self.body(self.src(src), self.tgt(tgt), tgt_mask=mask, tgt_is_causal=True))


@pytest.mark.parametrize("shared", [False, True])
def test_an_encoder_decoder_over_a_source_as_long_as_the_target_is_silent(shared):
    def translation(step):
        (x,), y = next_token(step)
        src = torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(100 + step))
        return (src, x), y

    torch.manual_seed(0)
    w = watched(Seq2Seq(shared), translation)
    assert gs470(w) == []
    decoder = read(w)["body.decoder.layers.0.self_attn"]
    assert decoder.next_token == decoder.reads and max(decoder.shares) == 0


def test_a_prefix_lm_whose_loss_ignores_the_prefix_is_silent_and_one_counting_it_is_not():
    prefix = 6

    def prefixed(ignored):
        def batch(step):
            (x,), y = next_token(step)
            return (x,), y.masked_fill(torch.arange(T) < prefix - 1, -100) if ignored else y

        return batch

    torch.manual_seed(0)
    w = watched(GPT("sdpa-prefix", prefix), prefixed(ignored=True))
    assert gs470(w) == [] and read(w)["blocks.0"].next_token == (1, 2, 3)
    torch.manual_seed(0)
    (found,) = gs470(watched(GPT("sdpa-prefix", prefix), prefixed(ignored=False)))
    assert found.subject == "blocks.0"


def test_long_sequences_are_measured_at_evenly_spaced_query_positions(monkeypatch):
    """Past MAX_ROWS positions (and MAX_HEADS heads) only a sample of the rows is measured:
    the verdicts hold."""
    from gradscope.watcher import future_attention

    monkeypatch.setattr(future_attention, "MAX_ROWS", 5)
    monkeypatch.setattr(future_attention, "MAX_HEADS", 1)
    torch.manual_seed(0)
    (found,) = gs470(watched(GPT("sdpa"), next_token))
    assert found.subject == "blocks.0" and found.value > 0.3
    for mode in ("sdpa-causal", "tril"):
        torch.manual_seed(0)
        w = watched(GPT(mode), next_token)
        assert gs470(w) == [] and max(read(w)["blocks.1"].shares) == 0


class TwoCalls(nn.Module):
    """One module attending twice over its tokens, causal first: each call of the module
    is judged by itself."""

    def __init__(self, causal: bool):
        super().__init__()
        self.emb, self.head, self.causal = nn.Embedding(V, D), nn.Linear(D, V), causal
        self.qkv = nn.Linear(D, 3 * D)

    def forward(self, idx):
        x = self.emb(idx)
        x = x + F.scaled_dot_product_attention(*self.qkv(x).split(D, -1), is_causal=True)
        q, k, v = self.qkv(x).split(D, -1)
        return self.head(x + F.scaled_dot_product_attention(q, k, v, is_causal=self.causal))


def test_a_module_whose_second_attention_sees_the_future_is_named_by_that_call():
    torch.manual_seed(0)
    (found,) = gs470(watched(TwoCalls(causal=False), next_token))
    assert found.subject == "TwoCalls (call 2)"
    torch.manual_seed(0)
    w = watched(TwoCalls(causal=True), next_token)
    assert gs470(w) == [] and set(read(w)) == {"TwoCalls", "TwoCalls (call 2)"}


def test_a_padding_query_whose_row_is_masked_whole_is_not_judged():
    """Left padding under an additive mask (Hugging Face's eager attention): the last pad
    position sees no key, so its softmax spreads evenly over all of them, later ones too,
    while its target is the first real token. Its own token is ignored by the loss (-100):
    padding, not judged; the positions after it are."""
    pad = 5

    def padded(step):
        (x,), y = next_token(step)
        x[:, :pad] = 0
        return (x,), y.masked_fill(torch.arange(T) < pad - 1, -100)

    torch.manual_seed(0)
    w = watched(GPT("left-padded", pad), padded)
    assert gs470(w) == [] and max(read(w)["blocks.0"].shares) == 0


def test_a_loop_that_updates_by_hand_is_measured_at_its_first_forward_only(monkeypatch):
    """No optimizer steps, so every forward is one of step 1: once that step's backward was
    read, the probe measures nothing more (the run is not judged: one read)."""
    from gradscope.watcher import future_attention

    measured = []
    later = future_attention._later
    monkeypatch.setattr(future_attention, "_later", lambda *a: measured.append(1) or later(*a))
    torch.manual_seed(0)
    model = GPT("sdpa")
    with gradscope.watch() as w:
        for step in range(6):
            (x,), y = next_token(step)
            loss = F.cross_entropy(model(x).reshape(-1, V), y.reshape(-1))
            model.zero_grad()
            loss.backward()
            with torch.no_grad():
                for p in model.parameters():
                    p -= 0.1 * p.grad
    assert len(measured) == 2 and gs470(w) == []  # one forward, its two attentions


@pytest.mark.parametrize("where", ["_later", "_counted_row"])  # in the forward, the backward
def test_a_failing_probe_switches_itself_off_and_the_run_goes_on(monkeypatch, where):
    from gradscope.watcher import future_attention

    def broken(*_):
        raise RuntimeError("injected")

    monkeypatch.setattr(future_attention, where, broken)
    torch.manual_seed(0)
    w = watched(GPT("sdpa"), next_token)
    (fault,) = w.report.faults
    assert fault.part == "the causal-mask probe" and fault.step == 1
    assert len(w.run.steps) == STEPS and gs470(w) == []


class StartTokenLM(TorchLM):
    """A start token and the targets embedded whole, the lookup sliced to its first T
    positions after it (SLATE's token decoder, many seq2seq decoders)."""

    def forward(self, seq):
        x = self.emb(seq)[:, :-1]
        mask = nn.Transformer.generate_square_subsequent_mask(T) if self.masked else None
        return self.head(self.body(x, mask=mask, is_causal=self.masked))


def start_token(step):
    tokens = torch.randint(1, V, (B, T), generator=torch.Generator().manual_seed(step))
    return (torch.cat([torch.zeros(B, 1, dtype=torch.long), tokens], 1),), tokens


def test_a_start_token_lookup_sliced_after_it_is_read_as_next_token():
    torch.manual_seed(0)
    (found,) = gs470(watched(StartTokenLM(masked=False), start_token))
    assert found.subject == "body.layers.0.self_attn"
    w = watched(StartTokenLM(masked=True), start_token)
    assert gs470(w) == [] and read(w) and max(max(f.shares) for f in read(w).values()) == 0
