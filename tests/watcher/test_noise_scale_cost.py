"""What the noise scale's per-backward measurement costs on the CPU: a small gradient's
norm waits for one fused norm at the end of the backward call (not a norm call per
tensor in its hook); a large one is taken in its hook, while in cache. Either way the
numbers are the micro-batches' own, against brute force."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import gradscope
from gradscope.watcher import noise_scale


def _counted(monkeypatch) -> list[int]:
    """Numels of the gradients whose norm a hook took on its own."""
    seen: list[int] = []
    original = noise_scale._cpu_norm

    def counting(grad: torch.Tensor) -> torch.Tensor:
        seen.append(grad.numel())
        return original(grad)

    monkeypatch.setattr(noise_scale, "_cpu_norm", counting)
    return seen


def _records(monkeypatch) -> list:
    """Every StepRecord as read back, before the store keeps its columns."""
    from gradscope.steps.step_store import StepStore

    kept: list = []
    extend = StepStore.extend

    def keeping(self, records):
        kept.extend(records)
        return extend(self, records)

    monkeypatch.setattr(StepStore, "extend", keeping)
    return kept


def _run(model: nn.Module, inputs: int, k: int, steps: int = 2):
    """Accumulation of k micro-batches of 4 samples at lr 0; each step's micro-batch
    gradients by brute force."""
    gen = torch.Generator().manual_seed(3)
    batches = [
        (torch.randn(4, inputs, generator=gen), torch.randn(4, 1, generator=gen))
        for _ in range(steps * k)
    ]
    params = list(model.parameters())
    brute = []
    for x, y in batches:
        g = torch.autograd.grad(nn.functional.mse_loss(model(x), y), params)
        brute.append(torch.cat([t.flatten() for t in g]).double())
    opt = torch.optim.SGD(params, lr=0.0)
    with gradscope.watch() as w:
        for s in range(steps):
            for x, y in batches[s * k : (s + 1) * k]:
                (nn.functional.mse_loss(model(x), y) / k).backward()
            opt.step()
            opt.zero_grad()
    return w.run.steps, torch.stack(brute)


@pytest.mark.parametrize("depth", [1, 4, 12])
def test_small_cpu_gradients_take_no_norm_call_each(depth, monkeypatch):
    """2 × depth + 2 small tensors, 4 micro-batches: no per-tensor norm in any hook, and
    the step's Σ|h_i|² is the brute-force one."""
    seen = _counted(monkeypatch)
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [nn.Linear(8, 8), nn.Tanh()]
    model = nn.Sequential(*layers, nn.Linear(8, 1))
    k = 4
    steps, brute = _run(model, 8, k)
    assert seen == []
    second = steps[1]
    assert second.micro_batches == k
    expected = float(brute[k:].square().sum(1).mean())
    assert second.micro_sq == pytest.approx(expected, rel=1e-5)


def test_a_large_cpu_gradient_is_normed_in_its_hook_and_the_small_ones_at_the_end(monkeypatch):
    """A 512 × 512 weight (1 MiB) beside small tensors: its norm in the hook, once per
    measured backward call; the sums the same as brute force."""
    seen = _counted(monkeypatch)
    records = _records(monkeypatch)
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(16, 512), nn.Tanh(), nn.Linear(512, 512), nn.Tanh(), nn.Linear(512, 1)
    )
    k = 3
    _, brute = _run(model, 16, k)
    assert seen == [512 * 512] * k  # the second step's calls (hooks go on at the first)
    second = records[1]
    assert second.micro_batches == k
    per_tensor = [p.numel() for p in model.parameters()]
    rows = brute[k:].split(per_tensor, dim=1)
    for i, part in enumerate(rows):
        want = float(part.square().sum(1).sum()) / k  # k · Σ_i |h_i|², h_i = g_i / k
        assert second.micro_param_sq[i] == pytest.approx(want, rel=1e-5)


@pytest.mark.parametrize("limit", [300, 4000])
def test_small_cpu_gradients_are_held_a_few_at_a_time(limit, monkeypatch):
    """The CPU's bound on the gradients held between two fused norms: chunks of at most
    `limit` bytes (plus the one that crossed it), the sums unchanged."""
    held: list[int] = []
    original = noise_scale.MicroGrads._norm_held

    def norm_held(call):
        held.append(call.bytes)
        return original(call)

    monkeypatch.setattr(noise_scale, "CPU_HELD_BYTES", limit)
    monkeypatch.setattr(noise_scale.MicroGrads, "_norm_held", staticmethod(norm_held))
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(16, 16) for _ in range(6)], nn.Linear(16, 1))
    k = 3
    steps, brute = _run(model, 16, k)
    largest = 16 * 16 * 4
    assert held and max(held) <= limit + largest
    assert steps[1].micro_sq == pytest.approx(float(brute[k:].square().sum(1).mean()), rel=1e-5)
