"""Memory-saving forwards the watch and inspect must leave as they are: selective activation
checkpointing (its cache of saved op outputs, handed back in order at the recompute, once)
and saved-tensor hooks that offload activations and free them when handed back. The
watch's own attention measurements ran inside the checkpoint's dispatch mode, and its
graph walks unpacked the hooked saved tensors: the script's backward then failed (a shape
it never made, a backward "an extra time", a KeyError in its offloader). The causal-mask
probe still reads an attention in such a region, and a missing mask is still named."""

from __future__ import annotations

import functools
from contextlib import nullcontext

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.graph import saved_tensors_hooks
from torch.utils.checkpoint import (
    CheckpointPolicy,
    checkpoint,
    create_selective_checkpoint_contexts,
)

import gradscope
from gradscope.findings import Severity

V, D, T, B, H = 16, 16, 8, 4, 2


def _save_matmuls(ctx, op, *args, **kwargs):
    """torch's selective-checkpoint recipe: matmuls saved, the rest recomputed."""
    saved = (torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default)
    return CheckpointPolicy.MUST_SAVE if op in saved else CheckpointPolicy.PREFER_RECOMPUTE


class Attention(nn.Module):
    def __init__(self, causal: bool):
        super().__init__()
        self.qkv, self.proj, self.causal = nn.Linear(D, 3 * D), nn.Linear(D, D), causal
        self.gamma = nn.Parameter(torch.full((D,), 0.1))  # LayerScale (CaiT)
        self.ln = nn.LayerNorm(D)  # pre-norm: its bias starts at 0

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = (
            z.view(b, t, H, D // H).transpose(1, 2) for z in self.qkv(self.ln(x)).split(D, 2)
        )
        # attention dropout: torch's math path on the CPU, matmuls the policy saves
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=0.1, is_causal=self.causal)
        return x + self.gamma * self.proj(y.transpose(1, 2).reshape(b, t, D))


class GPT(nn.Module):
    def __init__(self, causal: bool = True, whole: bool = False):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, D), nn.Embedding(T, D)
        self.blocks = nn.ModuleList(Attention(causal) for _ in range(2))
        self.head, self.whole = nn.Linear(D, V), whole

    def forward(self, idx):
        if self.whole:  # the model checkpointed whole, its token lookup inside the region
            return _selective(self._forward, idx)
        return self._forward(idx, per_block=True)

    def _forward(self, idx, per_block=False):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = _selective(block, x) if per_block else block(x)
        return self.head(x)


def _selective(fn, *args):
    context = functools.partial(create_selective_checkpoint_contexts, _save_matmuls)
    return checkpoint(fn, *args, use_reentrant=False, context_fn=context)


class Offloader:
    """Saved activations moved to a host store, popped (freed) when handed back."""

    def __init__(self):
        self.store: dict[int, torch.Tensor] = {}

    def pack(self, t):
        key = max(self.store, default=0) + 1
        self.store[key] = t.detach().clone()
        return key

    def unpack(self, key):
        return self.store.pop(key)


def _train(model, offload=False, steps=3):
    """A few AdamW steps of next-token prediction; `offload`: the forward and the loss
    under the Offloader's hooks. How many activations each step left in its store."""
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(0)
    left = []
    with gradscope.watch() as w:
        for _ in range(steps):
            tokens = torch.randint(0, V, (B, T + 1), generator=gen)
            off = Offloader()
            hooks = saved_tensors_hooks(off.pack, off.unpack) if offload else nullcontext()
            with hooks:
                logits = model(tokens[:, :-1])
                loss = F.cross_entropy(logits.reshape(-1, V), tokens[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            left.append(len(off.store))
    return w, left


@pytest.mark.parametrize("whole", [False, True])
def test_selective_checkpointing_runs_as_without_the_watch(whole):
    torch.manual_seed(0)
    w, _ = _train(GPT(whole=whole))
    assert w.report.findings == [] or all(f.severity is Severity.INFO for f in w.report.findings)
    assert w.run.steps and w.run.steps[-1].step == 3


def test_an_offloader_that_frees_on_unpack_keeps_its_activations_for_the_backward():
    torch.manual_seed(0)
    w, left = _train(GPT(), offload=True)
    assert left == [0, 0, 0]  # every offloaded activation handed back once, by the backward
    assert not [f for f in w.report.findings if f.severity is not Severity.INFO]


@pytest.mark.parametrize("whole", [False, True])
def test_inspect_of_a_selectively_checkpointed_model_runs_its_one_backward(whole):
    torch.manual_seed(0)
    tokens = torch.randint(0, V, (B, T + 1), generator=torch.Generator().manual_seed(0))
    target = tokens[:, 1:].reshape(-1)
    report = gradscope.inspect(
        GPT(whole=whole), tokens[:, :-1], lambda out: F.cross_entropy(out.reshape(-1, V), target)
    )
    assert not [f for f in report.findings if f.severity is not Severity.INFO]


def test_a_missing_causal_mask_is_still_named_under_selective_checkpointing():
    torch.manual_seed(0)
    w, _ = _train(GPT(causal=False), steps=4)
    (found,) = [f for f in w.report.findings if f.rule == "GS471"]
    assert found.subject == "blocks.0" and "is_causal=True" in found.advice
