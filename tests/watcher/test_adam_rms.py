"""Adam's per-tensor RMS_t, update RMS over the lr and share of √v̂ below eps, read from its
state after the step (watcher/adam_rms.py), against the same numbers computed from a
plain copy of the state: Adam, AdamW, amsgrad, a tensor split in pieces, a parameter
without a gradient; only at the sampled steps; SGD gives none."""

from __future__ import annotations

import collections
import math

import pytest
import torch

from gradscope.watcher import adam_rms, discover
from gradscope.watcher.adam_rms import AdamRms


def _tracked(model: torch.nn.Module) -> discover.Tracked:
    tracked = discover.Tracked()
    for name, p in model.named_parameters():
        tracked.add(name, p)
    return tracked


def _expected(opt, p, group) -> tuple[float, float, float]:
    state = opt.state[p]
    beta1, beta2 = group["betas"]
    eps = group["eps"]
    t = float(state["step"])
    v = state["max_exp_avg_sq" if group.get("amsgrad") else "exp_avg_sq"].double()
    hat = v / (1 - beta2**t)
    g = p.grad.double()
    rms = math.sqrt((g.square() / hat.clamp_min(eps * eps)).mean().item())
    m_hat = state["exp_avg"].double() / (1 - beta1**t)
    update = math.sqrt((m_hat / (hat.sqrt() + eps)).square().mean().item())
    live = v > 0
    share = ((hat.sqrt() < eps) & live).sum().item() / max(1, live.sum().item())
    return rms, update, share


def _run(make, steps=4, scale=None, frozen=False):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    opt = make(model.parameters())
    tracked = _tracked(model)
    probe = AdamRms()
    for step in range(1, steps + 1):
        loss = model(torch.randn(32, 8)).square().mean() * (1000.0 if scale == step else 1.0)
        opt.zero_grad()
        loss.backward()
        if frozen:
            model[0].bias.grad = None
        opt.step()
        probe.observe(tracked, 0, opt, step)
    return model, opt, tracked, probe.facts()


@pytest.mark.parametrize(
    "make",
    [
        lambda ps: torch.optim.Adam(ps, lr=1e-2),
        lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1),
        lambda ps: torch.optim.Adam(ps, lr=1e-2, amsgrad=True, eps=1e-3),
        lambda ps: torch.optim.AdamW(ps, lr=1e-2, foreach=False, eps=0.05),
    ],
)
def test_the_numbers_match_a_copy_of_the_state(make):
    _, opt, tracked, facts = _run(make, steps=50)
    assert [f.step for f in facts] == [50]
    got = {i: (r, u, s) for i, r, u, s in facts[-1].tensors}
    assert sorted(got) == list(range(4))
    for i, p in enumerate(tracked.params):
        want = _expected(opt, p, opt.param_groups[0])
        assert got[i] == pytest.approx(want, rel=1e-6, abs=1e-9)
    _, _, _, facts = _run(make, steps=99)
    assert [f.step for f in facts] == [50]  # steps 51-99: not sampled


def test_a_large_batch_shows_in_rms_t_and_the_update_after_it():
    """A loss ×1000 at step 50 (a sampled step) of an Adam run: every tensor's RMS_t near
    its bound at t = 50 (√50), and its update several times its size without the spike."""
    make = lambda ps: torch.optim.Adam(ps, lr=1e-2)  # noqa: E731
    _, _, _, calm = _run(make, steps=50)
    _, _, _, hit = _run(make, steps=50, scale=50)
    before = {i: (r, u) for i, r, u, _ in calm[-1].tensors}
    after = {i: (r, u) for i, r, u, _ in hit[-1].tensors}
    assert hit[-1].step == 50
    for i in range(4):
        assert before[i][0] < 3 and after[i][0] > 5  # bounded by about √t this early
        assert after[i][1] > 2 * before[i][1]


def test_pieces_add_up(monkeypatch):
    _, _, _, whole = _run(lambda ps: torch.optim.Adam(ps, lr=1e-2), steps=50)
    monkeypatch.setattr(adam_rms, "PIECE", 5)
    _, _, _, pieced = _run(lambda ps: torch.optim.Adam(ps, lr=1e-2), steps=50)
    for a, b in zip(whole[-1].tensors, pieced[-1].tensors, strict=True):
        assert a == pytest.approx(b, rel=1e-6)  # fused sums (adam_rms_batch) or pieces


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_small_tensors_fused_give_each_tensors_own_sums(dtype, monkeypatch):
    """The fused batch (adam_rms_batch.py: tensors up to PIECE elements together, in
    chunks of at most PIECE) against each tensor taken alone, on a model of many small
    tensors, chunked three ways."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(6, 6) for _ in range(5)]).to(dtype)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, eps=1e-4)
    tracked = _tracked(model)
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(4, 6, dtype=dtype)).square().mean().mul(1e-6).backward()
        opt.step()
    got = {}
    for limit in (10**6, 40, 0):  # one chunk; several; none (each tensor alone)
        if limit:
            monkeypatch.setattr(adam_rms, "PIECE", limit)
        else:
            monkeypatch.setattr(adam_rms.batched, "batchable", lambda *a: False)
        positions, values = adam_rms._group(tracked, opt, opt.param_groups[0])
        got[limit] = dict(zip(positions, values.tolist(), strict=True))
    assert sorted(got[0]) == list(range(10))
    for limit in (10**6, 40):
        for i, row in got[0].items():
            assert got[limit][i] == pytest.approx(row, rel=1e-6), (limit, i)
    assert any(r[3] > 0 for r in got[0].values())  # some elements under eps: counted alike


def test_a_sample_of_many_small_tensors_takes_a_few_fused_ops(monkeypatch):
    """Ops per sampled step independent of the number of tensors (about 20 a tensor
    before): the same count for 20 and 60 tensors, fewer than one a tensor."""
    from torch.overrides import TorchFunctionMode

    reads = {"__get__", "numel", "is_contiguous", "is_complex", "item", "_set_grad_enabled"}

    def computed(layers: int) -> int:
        calls = []

        class Count(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                calls.append(func)
                return func(*args, **(kwargs or {}))

        torch.manual_seed(0)
        model = torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(layers)])
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        model(torch.randn(2, 4)).sum().backward()
        opt.step()
        with Count():
            AdamRms().observe(_tracked(model), 0, opt, 50)
        ops = collections.Counter(getattr(f, "__name__", "") for f in calls)
        return sum(n for name, n in ops.items() if name not in reads)

    few, many = computed(10), computed(30)
    assert 0 < few == many < 60, (few, many)


def test_a_parameter_without_a_gradient_and_sgd_give_nothing():
    _, _, tracked, facts = _run(lambda ps: torch.optim.Adam(ps, lr=1e-2), steps=50, frozen=True)
    bias = tracked.index[id(tracked.params[1])]
    assert bias not in {i for i, *_ in facts[-1].tensors}
    _, _, _, facts = _run(lambda ps: torch.optim.SGD(ps, lr=1e-2, momentum=0.9), steps=50)
    assert facts == []


def test_which_steps_are_sampled():
    assert [s for s in range(1, 101) if adam_rms.sampled(s)] == [50, 100]
    assert all(adam_rms.sampled(s) for s in range(101, 130))  # the update's own sampling after


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("fused", [False, True])
def test_a_sample_on_cuda_does_not_wait_for_the_device(fused):
    """The step count on the host (torch's default) is read there, one on the device (fused)
    stays there: nothing in `observe` synchronises."""
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, fused=fused)
    tracked = _tracked(model)
    probe = AdamRms()
    for step in range(1, 51):
        model(torch.randn(16, 8, device="cuda")).square().mean().backward()
        opt.step()
        torch.cuda.set_sync_debug_mode("error")
        try:
            probe.observe(tracked, 0, opt, step)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        opt.zero_grad()
    (sample,) = probe.facts()
    want = _expected(opt, tracked.params[0], opt.param_groups[0])
    assert sample.tensors[0][1:] == pytest.approx(want, rel=1e-5, abs=1e-9)


def test_eps_counts_of_a_step_both_sample_are_taken_once(monkeypatch):
    """At a step adam_rms.py samples (50, 100), adam_eps.py takes its counts of
    elements under eps rather than counting again: the same numbers; a tensor it did not
    sample (no gradient at that step) is counted there as before."""
    from gradscope.watcher import adam_eps

    make = lambda ps: torch.optim.Adam(ps, lr=1e-2, eps=0.03)  # noqa: E731
    model, opt, tracked, _ = _run(make, steps=49)
    opt.zero_grad()
    model(torch.randn(32, 8)).square().mean().backward()
    model[0].bias.grad = None  # a state from earlier steps, no gradient at this one
    opt.step()
    counted = AdamRms().observe(tracked, 0, opt, 50)
    frozen = 1  # model[0].bias
    assert sorted(counted) == [0, 2, 3]
    calls = []
    real = adam_eps.eps_counts
    monkeypatch.setattr(adam_eps, "eps_counts", lambda v, f: calls.append(v) or real(v, f))
    shared, alone = adam_eps.AdamEps(), adam_eps.AdamEps()
    shared.observe(tracked, 0, opt, 50, counted)
    assert len(calls) == 1 and calls[0] is opt.state[tracked.params[frozen]]["exp_avg_sq"]
    alone.observe(tracked, 0, opt, 50)
    assert len(calls) == 1 + 4
    (a,), (b,) = shared.facts(), alone.facts()
    assert a == b and any(share > 0 for _, share, _ in a.shares)


def test_a_chunks_sums_take_no_l1_norm_and_v_is_not_divided_first():
    """The fused sums count with squared L2 norms (an L1 norm takes four times the CPU
    on a CPU) and take √v once, the bias folded into scalars (no division of v first):
    two divisions, those of g and m."""
    from torch.overrides import TorchFunctionMode

    calls = []

    class Record(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            calls.append((func, args))
            return func(*args, **(kwargs or {}))

    g, m, v = torch.randn(300), torch.randn(300) * 0.1, torch.rand(300) * 1e-4
    chunk = [(0, g, m, v, 1e-3, 0.05, 0.4)]
    with Record():
        adam_rms.batched.rows(chunk, 1e-2)
    norms_l1 = [a for f, a in calls if f is torch._foreach_norm and len(a) > 1 and a[1] == 1]
    divisions = [f for f, _ in calls if getattr(f, "__name__", "").startswith("_foreach_div")]
    assert not norms_l1 and len(divisions) == 2


@pytest.mark.parametrize("n", [3, 2**20])
def test_the_fused_counts_are_exact_up_to_a_whole_piece(n):
    """Counts as squared L2 norms of signs, rounded: the exact numbers of elements under
    eps and with v > 0, up to a chunk of PIECE elements; the sums as the plain formula
    (to the float32 fused norm's 1e-4 over a million elements)."""
    gen = torch.Generator().manual_seed(3)
    v = torch.rand(n, generator=gen) * 2e-4
    v[torch.rand(n, generator=gen) < 0.3] = 0.0
    g, m = torch.randn(n, generator=gen), torch.randn(n, generator=gen) * 0.01
    eps, bias, first = 1e-2, 0.05, 0.4
    floor = bias * eps * eps
    (row,) = adam_rms.batched.rows([(0, g, m, v, floor, bias, first)], eps).tolist()
    live = int((v > 0).sum())
    under = int(((v < floor) & (v > 0)).sum())
    assert row[2:] == [n, under, live]
    hat = v.double() / bias
    rms = (g.double().square() / hat.clamp_min(eps * eps)).sum().item()
    update = ((m.double() / first) / (hat.sqrt() + eps)).square().sum().item()
    assert row[:2] == pytest.approx([rms, update], rel=1e-4)


def test_a_tensors_sums_alike_with_the_bias_as_a_float_or_a_0_dim_tensor(monkeypatch):
    """A capturable or fused step count lives on the device: the bias then is a 0-dim
    float64 tensor, folded into the same scalars (here on the CPU, in pieces)."""
    monkeypatch.setattr(adam_rms, "PIECE", 64)
    gen = torch.Generator().manual_seed(5)
    g, m = torch.randn(300, generator=gen), torch.randn(300, generator=gen) * 0.1
    v = torch.rand(300, generator=gen) * 1e-4
    host = adam_rms._sums(g, m, v, 0.05, 0.4, 1e-2)
    device = adam_rms._sums(g, m, v, torch.tensor(0.05, dtype=torch.float64), 0.4, 1e-2)
    assert device.tolist() == pytest.approx(host.tolist(), rel=1e-12)
