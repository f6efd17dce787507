"""GPU paths: run where CUDA is available, skipped (with the reason shown by -ra) elsewhere."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

import gradscope
from gradscope.examples.transformer import GPTConfig, make_gpt

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA device; CI has none"
)


def test_inspect_on_cuda_matches_cpu_and_restores_rng():
    model, batch = make_gpt(GPTConfig(layers=2, dropout=0.1))
    cpu = gradscope.inspect(model, batch)
    model.cuda()
    batch = {k: v.cuda() for k, v in batch.items()}
    rng = torch.cuda.get_rng_state()
    gpu = gradscope.inspect(model, batch)
    assert torch.equal(torch.cuda.get_rng_state(), rng)
    assert gpu.stats.device.startswith("cuda")
    for a, b in zip(cpu.stats.params, gpu.stats.params, strict=False):
        assert b.grad_norm == pytest.approx(a.grad_norm, rel=1e-3), a.name


def test_inspect_under_autocast_bf16():
    model, batch = make_gpt(GPTConfig(layers=2))
    model.cuda()
    batch = {k: v.cuda() for k, v in batch.items()}

    def loss_fn(out):
        return F.cross_entropy(out.logits.float().flatten(0, 1), batch["targets"].flatten())

    with torch.autocast("cuda", dtype=torch.bfloat16):
        report = gradscope.inspect(model, {"idx": batch["idx"]}, loss_fn)
    assert report.findings == []
    assert all(p.finite and p.has_grad for p in report.stats.params)
