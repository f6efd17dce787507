"""GPU paths of watch: run where CUDA is available, skipped (reason shown by -ra) elsewhere."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

import gradscope
from gradscope.examples.transformer import GPTConfig, make_gpt

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA device; CI has none"
)


def test_no_host_sync_inside_the_steps():
    """CUDA's sync debug mode raises on any synchronizing call made during the steps;
    the read-back (flush_every) is past the last step."""
    model, batch = make_gpt(GPTConfig(layers=2))
    model.cuda()
    batch = {k: v.cuda() for k, v in batch.items()}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step() -> None:
        loss = model(**batch).loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
        opt.step()

    step()  # lazy optimizer state outside the check
    with gradscope.watch(flush_every=1000, update_every=3) as w:
        step()  # the first step finds the model (host-side only)
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            for _ in range(8):
                step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    assert len(w.run.steps) == 9 and w.report.findings == []
    assert all(v is not None and v > 0 for v in w.run.steps[-1].param_norms)


@pytest.mark.parametrize("fused", [False, True])
def test_fp16_grad_scaler_on_cuda(fused):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    model.cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, fused=fused)
    scaler = torch.amp.GradScaler("cuda", init_scale=2.0**16)
    true_norms = []
    with gradscope.watch() as w:
        for step in range(1, 31):
            x = torch.randn(32, 64, device="cuda")
            with torch.autocast("cuda", dtype=torch.float16):
                loss = F.mse_loss(model(x).float(), x[:, :1])
            opt.zero_grad()
            scaler.scale(loss).backward()
            if step == 10:
                model[0].weight.grad[0, 0] = float("inf")
            scaler.unscale_(opt)
            grads = [p.grad for p in model.parameters()]
            true_norms.append(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads])))
            scaler.step(opt)
            scaler.update()
    steps = w.run.steps
    assert [r.step for r in steps if r.skipped] == [10]
    for r, n in zip(steps, true_norms, strict=True):
        if not r.skipped:
            assert r.grad_norm == pytest.approx(n.item(), rel=1e-5)


def test_noise_scale_on_cuda_without_host_sync():
    """Gradient accumulation under GradScaler on CUDA: the micro-batch norms are taken
    and unscaled on the device with no sync in the steps, and agree with the CPU's
    arithmetic on the same gradients."""
    torch.manual_seed(0)
    model, batch = make_gpt(GPTConfig(layers=2))
    model.cuda()
    batch = {k: v.cuda() for k, v in batch.items()}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cuda", init_scale=2.0**12)
    k, seen = 4, []

    def step(check: bool) -> None:
        for _ in range(k):
            scaler.scale(model(**batch).loss / k).backward()
            if check:  # the brute-force reference, only outside the sync check
                grads = [p.grad.double() / scaler.get_scale() for p in model.parameters()]
                seen.append(grads)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()

    step(False)
    with gradscope.watch(flush_every=1000) as w:
        step(False)  # the first step finds the model and attaches the hooks
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            for _ in range(3):
                step(False)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        step(True)
    records = list(w.run.steps)
    assert [r.micro_batches for r in records] == [0, k, k, k, k]
    running = seen  # .grad after each micro-batch: differences are the micro gradients
    micro = [
        sum(float((b - a).square().sum()) for a, b in zip(prev, cur, strict=True))
        for prev, cur in zip([[g * 0 for g in running[0]], *running[:-1]], running, strict=True)
    ]
    assert records[-1].micro_sq == pytest.approx(k * sum(micro), rel=1e-4)


def test_nan_weights_under_a_finite_loss_are_read_within_steps_not_at_the_read_back():
    """The step's non-finite gradient flag is copied to the host without blocking and read
    once its event is done (nan_probe.early): the recorder reads back then, long before
    flush_every, and the next backward finds the weights NaN (GS434)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    model.cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gradscope.watch(flush_every=50) as w:
        for _ in range(12):
            out = model(torch.randn(16, 4, device="cuda"))
            d = ((out[:, None] - out[None]) ** 2).sum(-1)
            loss = torch.sqrt(d).mean()  # sqrt(0) on the diagonal: NaN gradients, finite loss
            opt.zero_grad()
            loss.backward()
            opt.step()
    found = w.run.weights_nan
    assert found is not None and found.seen == 1
    assert found.checked <= 3, found  # not the 12th step's read-back at the watch's end
