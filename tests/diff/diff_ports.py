"""Hand-written ports of HuggingFace GPT-2 and Llama, with their parameter names, and the
usual port bugs to seed one at a time (`bugs`): each bug lives in exactly one module.

GPT-2 bugs: "eps" (ln_1 of block 0), "gelu" (exact GELU in block 0's mlp.act), "transpose"
(block 1's attn.c_proj multiplies by W.T), "scale" (block 0's attention divides by d, not
sqrt(d)), "residual" (block 1 drops its first residual), "dropout" (block 0's attention
dropout with training=True), "bf16" (block 1's attention softmax in bfloat16).
Llama bugs: "rms-eps" (block 0's input_layernorm), "rotary" (interleaved rotary in block 0's
attention instead of half-split).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

VOCAB, DIM, HEADS, LAYERS, SEQ, POSITIONS = 64, 32, 4, 2, 8, 16

GPT2_BUG_AT = {
    "eps": "h.0.ln_1",
    "gelu": "h.0.mlp.act",
    "transpose": "h.1.attn.c_proj",
    "scale": "h.0.attn",
    "residual": "h.1",
    "dropout": "h.0.attn",
    "bf16": "h.1.attn",
}
LLAMA_BUG_AT = {"rms-eps": "layers.0.input_layernorm", "rotary": "layers.0.self_attn"}


def ids() -> torch.Tensor:
    return torch.randint(0, VOCAB, (2, SEQ), generator=torch.Generator().manual_seed(1))


def hidden(out):
    return out if isinstance(out, torch.Tensor) else out.last_hidden_state


_PROBE = torch.randn(2, SEQ, DIM, generator=torch.Generator().manual_seed(2))


def loss_fn(out):
    """A fixed random projection of the last hidden state: every element matters."""
    return (hidden(out) * _PROBE).sum()


# --- GPT-2 --------------------------------------------------------------------------------


def hf_gpt2():
    from transformers import GPT2Config, GPT2Model

    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=VOCAB, n_positions=POSITIONS, n_embd=DIM, n_layer=LAYERS, n_head=HEADS,
        use_cache=False, attn_implementation="eager", initializer_range=0.2,
    )  # fmt: skip
    return GPT2Model(config).eval()


class Conv1D(nn.Module):
    """GPT-2's layout: weight is (in, out)."""

    def __init__(self, nx: int, nf: int, transposed: bool = False):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(nx, nf) * 0.02)
        self.bias = nn.Parameter(torch.zeros(nf))
        self.transposed = transposed

    def forward(self, x):
        w = self.weight.t() if self.transposed else self.weight
        return x @ w + self.bias


class TanhGELU(nn.Module):
    def forward(self, x):
        return F.gelu(x, approximate="tanh")


class Attention(nn.Module):
    def __init__(self, bugs: set[str], layer: int):
        super().__init__()
        self.c_attn = Conv1D(DIM, 3 * DIM)
        self.c_proj = Conv1D(DIM, DIM, transposed="transpose" in bugs and layer == 1)
        self.resid_dropout = nn.Dropout(0.1)
        self.bugs = bugs if layer == (1 if bugs & {"bf16"} else 0) else set()

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = (
            z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in self.c_attn(x).split(c, 2)
        )
        d = c // HEADS
        scale = 1.0 / d if "scale" in self.bugs else 1.0 / math.sqrt(d)
        att = (q @ k.transpose(-2, -1)) * scale
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~causal, torch.finfo(att.dtype).min)
        if "bf16" in self.bugs:
            att = att.to(torch.bfloat16).softmax(-1).float()
        else:
            att = att.softmax(-1)
        if "dropout" in self.bugs:
            att = F.dropout(att, 0.1, training=True)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, bugs: set[str], layer: int):
        super().__init__()
        self.c_fc = Conv1D(DIM, 4 * DIM)
        self.act = nn.GELU() if "gelu" in bugs and layer == 0 else TanhGELU()
        self.c_proj = Conv1D(4 * DIM, DIM)
        self.dropout = nn.Dropout(0.1)

    def forward(self, x):
        return self.dropout(self.c_proj(self.act(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, bugs: set[str], layer: int):
        super().__init__()
        self.ln_1 = nn.LayerNorm(DIM, eps=1e-6 if "eps" in bugs and layer == 0 else 1e-5)
        self.attn = Attention(bugs, layer)
        self.ln_2 = nn.LayerNorm(DIM, eps=1e-5)
        self.mlp = MLP(bugs, layer)
        self.no_residual = "residual" in bugs and layer == 1

    def forward(self, x):
        a = self.attn(self.ln_1(x))
        x = a if self.no_residual else x + a
        return x + self.mlp(self.ln_2(x))


class GPT2Port(nn.Module):
    def __init__(self, bugs: set[str] = frozenset()):  # type: ignore[assignment]
        super().__init__()
        self.wte = nn.Embedding(VOCAB, DIM)
        self.wpe = nn.Embedding(POSITIONS, DIM)
        self.drop = nn.Dropout(0.1)
        self.h = nn.ModuleList(Block(set(bugs), i) for i in range(LAYERS))
        self.ln_f = nn.LayerNorm(DIM, eps=1e-5)

    def forward(self, input_ids):
        pos = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.drop(self.wte(input_ids) + self.wpe(pos[None]))
        for block in self.h:
            x = block(x)
        return self.ln_f(x)


def gpt2_ref():
    return hf_gpt2(), {"input_ids": ids()}, loss_fn


def gpt2_port(bugs=()):
    torch.manual_seed(5)
    return GPT2Port(set(bugs)).eval(), {"input_ids": ids()}, loss_fn


# --- Llama ---------------------------------------------------------------------------------


def hf_llama():
    from transformers import LlamaConfig, LlamaModel

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=VOCAB, hidden_size=DIM, intermediate_size=64, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, num_key_value_heads=HEADS, max_position_embeddings=POSITIONS,
        use_cache=False, attn_implementation="eager", rms_norm_eps=1e-6, initializer_range=0.2,
    )  # fmt: skip
    return LlamaModel(config).eval()


class RMSNorm(nn.Module):
    def __init__(self, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(DIM))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rotate(x, interleaved: bool):
    if interleaved:
        pairs = x.unflatten(-1, (-1, 2))
        return torch.stack((-pairs[..., 1], pairs[..., 0]), -1).flatten(-2)
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), -1)


class LlamaAttention(nn.Module):
    def __init__(self, interleaved: bool):
        super().__init__()
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            setattr(self, name, nn.Linear(DIM, DIM, bias=False))
        self.interleaved = interleaved

    def forward(self, x, cos, sin):
        b, t, c = x.shape
        d = c // HEADS
        q, k, v = (
            p(x).view(b, t, HEADS, d).transpose(1, 2)
            for p in (self.q_proj, self.k_proj, self.v_proj)
        )
        if self.interleaved:  # the bug: rotate adjacent pairs with interleaved angles
            cos = cos[..., : d // 2].repeat_interleave(2, -1)
            sin = sin[..., : d // 2].repeat_interleave(2, -1)
        q = q * cos + rotate(q, self.interleaved) * sin
        k = k * cos + rotate(k, self.interleaved) * sin
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d)
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        att = att.masked_fill(~causal, torch.finfo(att.dtype).min).softmax(-1)
        return self.o_proj((att @ v).transpose(1, 2).reshape(b, t, c))


class LlamaMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate_proj = nn.Linear(DIM, 64, bias=False)
        self.up_proj = nn.Linear(DIM, 64, bias=False)
        self.down_proj = nn.Linear(64, DIM, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class LlamaLayer(nn.Module):
    def __init__(self, bugs: set[str], layer: int):
        super().__init__()
        self.input_layernorm = RMSNorm(1e-5 if "rms-eps" in bugs and layer == 0 else 1e-6)
        self.self_attn = LlamaAttention("rotary" in bugs and layer == 0)
        self.post_attention_layernorm = RMSNorm(1e-6)
        self.mlp = LlamaMLP()

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaPort(nn.Module):
    def __init__(self, bugs: set[str] = frozenset()):  # type: ignore[assignment]
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, DIM)
        self.layers = nn.ModuleList(LlamaLayer(set(bugs), i) for i in range(LAYERS))
        self.norm = RMSNorm(1e-6)
        d = DIM // HEADS
        self.register_buffer("inv_freq", 10000.0 ** (-torch.arange(0, d, 2).float() / d))

    def forward(self, input_ids):
        t = input_ids.shape[1]
        freqs = torch.arange(t).float()[:, None] * self.inv_freq[None]
        emb = torch.cat((freqs, freqs), -1)
        cos, sin = emb.cos(), emb.sin()
        x = self.embed_tokens(input_ids)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.norm(x)


def llama_ref():
    return hf_llama(), {"input_ids": ids()}, loss_fn


def llama_port(bugs=()):
    torch.manual_seed(5)
    return LlamaPort(set(bugs)).eval(), {"input_ids": ids()}, loss_fn
