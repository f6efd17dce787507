"""torch's clip_grad_norm_ finished from the watch's own gradient norms (clip_reuse.py):
the total and the clipped gradients bit for bit torch's, the gradients read once a step,
and torch's own clip wherever the norms may differ."""

from __future__ import annotations

import functools

import pytest
import torch
from torch import nn

from gradscope.watcher import watch


def _net(dtype=torch.float32, unused=False):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4)).to(dtype)
    if unused == "bfloat16":  # a gradient the watch's fused norm widens to float32
        net.low = nn.Parameter(torch.randn(3, dtype=torch.bfloat16))
    elif unused:
        net.extra = nn.Linear(3, 3).to(dtype)  # in the optimizer, never given a gradient
    return net


def _run(watched, setup, steps=4):
    """The totals each clip returned and the weights after `steps` clipped AdamW steps."""
    dtype, unused, pick, kwargs = setup
    net = _net(dtype, unused)
    opt = torch.optim.AdamW(net.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(steps, 5, 8, generator=g, dtype=dtype) * 30
    totals = []

    def loop():
        for i in range(steps):
            loss = net[2](net[1](net[0](x[i]))).square().mean()
            if unused == "bfloat16":
                loss = loss + net.low.float().square().sum()
            opt.zero_grad()
            loss.backward()
            totals.append(torch.nn.utils.clip_grad_norm_(pick(net), 0.5, **kwargs).clone())
            opt.step()

    if watched:
        with watch(update_every=25, flush_every=2):
            loop()
    else:
        loop()
    return totals, [p.detach().clone() for p in net.parameters()]


SETUPS = {
    "list": (torch.float32, False, lambda n: list(n.parameters()), {}),
    "generator": (torch.float32, False, lambda n: n.parameters(), {}),
    "subset, reversed": (torch.float32, False, lambda n: list(n[2].parameters())[::-1], {}),
    "a tensor": (torch.float32, False, lambda n: n[0].weight, {}),
    "float64": (torch.float64, False, lambda n: n.parameters(), {}),
    "a parameter without a gradient": (torch.float32, True, lambda n: n.parameters(), {}),
    "float32 beside a bfloat16": (torch.float32, "bfloat16", lambda n: list(n[0].parameters()), {}),
    "with a bfloat16": (torch.float32, "bfloat16", lambda n: n.parameters(), {}),
    "inf norm": (torch.float32, False, lambda n: n.parameters(), {"norm_type": float("inf")}),
    "foreach=False": (torch.float32, False, lambda n: n.parameters(), {"foreach": False}),
    "error_if_nonfinite": (
        torch.float32,
        False,
        lambda n: n.parameters(),
        {"error_if_nonfinite": True},
    ),
}


@pytest.mark.parametrize("name", SETUPS)
def test_a_watched_clip_returns_torchs_total_and_leaves_torchs_weights_bit_for_bit(name):
    bare_totals, bare_weights = _run(False, SETUPS[name])
    totals, weights = _run(True, SETUPS[name])
    assert [t.dtype for t in totals] == [t.dtype for t in bare_totals]
    assert all(torch.equal(a, b) for a, b in zip(totals, bare_totals, strict=True))
    assert all(torch.equal(a, b) for a, b in zip(weights, bare_weights, strict=True))


def test_a_zero_gradient_is_clipped_by_torch_as_it_would_be():
    """A norm of 0 is taken again in float64 by the watch: torch's own clip runs."""
    setup = (torch.float32, False, lambda n: n.parameters(), {})

    def zeroed(watched):
        net = _net()
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        x = torch.randn(5, 8, generator=torch.Generator().manual_seed(2))

        def loop():
            for _ in range(3):
                opt.zero_grad()
                net(x).square().mean().backward()
                net[0].bias.grad.zero_()
                total = torch.nn.utils.clip_grad_norm_(setup[2](net), 0.1)
                opt.step()
            return total

        if not watched:
            return loop(), [p.detach().clone() for p in net.parameters()]
        with watch(update_every=25):
            total = loop()
        return total, [p.detach().clone() for p in net.parameters()]

    (a, wa), (b, wb) = zeroed(False), zeroed(True)
    assert torch.equal(a, b)
    assert all(torch.equal(x, y) for x, y in zip(wa, wb, strict=True))


@pytest.mark.parametrize("unused", [False, True])
def test_a_watched_clip_step_reads_its_gradients_once(monkeypatch, unused):
    """One fused norm of the gradients a step on the CPU: the watch's (torch's total is
    taken from it), not the watch's and then torch's again; also beside a parameter the
    step gives no gradient (its -1 in the watch's float32 vector)."""
    calls = []
    fused = torch._foreach_norm

    def counted(*a, **kw):
        calls.append(len(a[0]))
        return fused(*a, **kw)

    net = _net(unused=unused)
    opt = torch.optim.AdamW(net.parameters(), lr=0.01)
    x = torch.randn(5, 8)
    with watch(update_every=1000):
        for step in range(12):
            opt.zero_grad()
            net[2](net[1](net[0](x))).square().mean().backward()
            if step == 11:
                monkeypatch.setattr(torch, "_foreach_norm", counted)
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            monkeypatch.setattr(torch, "_foreach_norm", fused)
            opt.step()
    assert calls == [4]


def test_a_clip_another_library_wrapped_still_runs_its_wrapper():
    """A clip_grad_norm_ that is not torch's own (a wrapper set before the watch) is
    called as it is: its own work is never skipped."""
    seen = []
    torchs = torch.nn.utils.clip_grad_norm_

    @functools.wraps(torchs)
    def logged(*a, **kw):
        seen.append(1)
        return torchs(*a, **kw)

    net = _net()
    opt = torch.optim.SGD(net.parameters(), lr=0.0)
    x = torch.randn(5, 8)
    try:
        torch.nn.utils.clip_grad_norm_ = logged
        with watch(update_every=1000):
            for _ in range(3):
                net.zero_grad()
                net(x).square().mean().backward()
                torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
                opt.step()
    finally:
        torch.nn.utils.clip_grad_norm_ = torchs
    assert seen == [1, 1, 1]
