"""Training scripts with activation checkpointing, inspected with the live watch on.

The live watch runs in the step's forward: whatever it computes must not be saved for
the backward, or a non-reentrant checkpoint sees a different number of saved tensors
when it recomputes its region (CheckpointError) and a script that trains fine fails
under gradscope. Every flavour must give the gradients of the same script without
checkpointing, and the same findings.
"""

from __future__ import annotations

import textwrap

import pytest

import gradscope

SCRIPT = textwrap.dedent(
    """
    import functools, sys
    import torch
    from torch import nn
    from torch.nn import functional as F
    from torch.utils import checkpoint as ck

    MODE = sys.argv[1]
    torch.manual_seed(0)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln, self.fc = nn.LayerNorm(16), nn.Linear(16, 16)

        def forward(self, x):
            return x + torch.tanh(F.gelu(self.fc(self.ln(x))))

    def policy(ctx, op, *args, **kwargs):
        keep = op == torch.ops.aten.mm.default
        return ck.CheckpointPolicy.MUST_SAVE if keep else ck.CheckpointPolicy.PREFER_RECOMPUTE

    def run(block, h):
        if MODE == "plain":
            return block(h)
        if MODE == "selective":
            made = functools.partial(ck.create_selective_checkpoint_contexts, policy)
            return ck.checkpoint(block, h, use_reentrant=False, context_fn=made)
        return ck.checkpoint(block, h, use_reentrant=MODE == "reentrant")

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem, self.head = nn.Linear(8, 16), nn.Linear(16, 3)
            self.blocks = nn.Sequential(*[Block() for _ in range(3)])

        def forward(self, x):
            h = self.stem(x)
            if MODE == "sequential":
                h = ck.checkpoint_sequential(self.blocks, 2, h, use_reentrant=False)
            else:
                for block in self.blocks:
                    h = run(block, h)
            return self.head(h)

    model = Net()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(3):
        x, y = torch.randn(4, 8), torch.randint(0, 3, (4,))
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    """
)


def _grads(report):
    return {p.name: p.grad_norm for p in report.stats.params}


@pytest.fixture(scope="module")
def script(tmp_path_factory):
    path = tmp_path_factory.mktemp("ck") / "train.py"
    path.write_text(SCRIPT)
    return str(path)


@pytest.fixture(scope="module")
def plain(script):
    return gradscope.inspect_script(script, ["plain"], step=2)


@pytest.mark.parametrize("mode", ["non-reentrant", "reentrant", "sequential", "selective"])
def test_every_checkpoint_flavour_inspects_as_the_plain_script(script, plain, mode):
    report = gradscope.inspect_script(script, [mode], step=2)
    assert _grads(report) == pytest.approx(_grads(plain), rel=1e-6)
    assert report.stats.loss_value == pytest.approx(plain.stats.loss_value, rel=1e-6)
    assert [f.rule for f in report.findings] == [f.rule for f in plain.findings] == []


HF = textwrap.dedent(
    """
    import sys
    import torch
    import transformers

    torch.manual_seed(0)
    cfg = transformers.GPT2Config(
        vocab_size=64, n_embd=32, n_layer=2, n_head=4,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
    )
    model = transformers.GPT2LMHeadModel(cfg).train()
    if sys.argv[1] == "checkpointed":
        model.gradient_checkpointing_enable()  # non-reentrant: transformers' default
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(2):
        ids = torch.randint(0, 64, (2, 12))
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
    """
)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:`gradient_checkpointing_enable` is deprecated")
def test_hf_gradient_checkpointing_script(tmp_path):
    pytest.importorskip("transformers")
    path = tmp_path / "train_hf.py"
    path.write_text(HF)
    plain = gradscope.inspect_script(str(path), ["plain"])
    checkpointed = gradscope.inspect_script(str(path), ["checkpointed"])
    assert _grads(checkpointed) == pytest.approx(_grads(plain), rel=1e-5, abs=1e-12)
    assert checkpointed.findings == plain.findings == []
