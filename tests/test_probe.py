"""The probe on real torch models: correct numbers, state left exactly as found."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import gradscope
from gradscope.errors import TargetError, UserCodeError
from gradscope.examples.functions import CustomReLU
from gradscope.inspector import fused_stats, preserve, probe, shard_stats


def reference_norms(model, batch, loss_fn):
    """Plain autograd: the oracle the probe's fused statistics must match."""
    model.zero_grad(set_to_none=True)
    loss_fn(model(batch)).backward()
    out = {
        n: (p.grad.norm().item(), p.grad.abs().max().item(), (p.grad == 0).float().mean().item())
        for n, p in model.named_parameters()
    }
    model.zero_grad(set_to_none=True)
    return out


def test_stats_match_plain_autograd():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    x, y = torch.randn(5, 8), torch.tensor([0, 1, 2, 0, 1])
    loss_fn = lambda out: F.cross_entropy(out, y)  # noqa: E731
    expected = reference_norms(model, x, loss_fn)
    run = probe.run(model, x, loss_fn)
    assert [p.name for p in run.params] == list(expected)
    for p in run.params:
        norm, mx, _ = expected[p.name]
        assert p.grad_norm == pytest.approx(norm, rel=1e-5)
        assert p.grad_max == pytest.approx(mx, rel=1e-6)
        assert p.zero_fraction is None  # counted only for lookup tables (and all-zero grads)
        assert p.weight_norm == pytest.approx(
            dict(model.named_parameters())[p.name].norm().item(), rel=1e-5
        )
    assert run.loss_value == pytest.approx(loss_fn(model(x)).item(), rel=1e-6)
    assert [p.depth for p in run.params] == [1, 1, 3, 3]  # root is 0, ReLU is 2


class Stateful(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.bn = nn.BatchNorm1d(4)
        self.drop = nn.Dropout(0.5)
        self.frozen = nn.Linear(4, 4)
        self.frozen.requires_grad_(False)

    def forward(self, x):
        return self.drop(self.bn(self.fc(x) + self.frozen(x)))


def snapshot(model):
    return {
        "flags": {n: p.requires_grad for n, p in model.named_parameters()},
        "grads": {n: p.grad for n, p in model.named_parameters()},
        "grad_values": {
            n: None if p.grad is None else p.grad.clone() for n, p in model.named_parameters()
        },
        "modes": {n: m.training for n, m in model.named_modules()},
        "buffers": {n: b.clone() for n, b in model.named_buffers()},
        "hooks": sum(
            len(m._forward_hooks) + len(m._forward_pre_hooks) + len(m._backward_hooks)
            for m in model.modules()
        ),
        "params": {n: p.detach().clone() for n, p in model.named_parameters()},
    }


@pytest.mark.parametrize("training", [True, False])
def test_api_restores_every_piece_of_model_state(training):
    torch.manual_seed(0)
    model = Stateful().train(training)
    model.fc.weight.grad = torch.full_like(model.fc.weight, 7.0)  # an accumulated grad
    model.bn.eval() if not training else None
    x = torch.randn(6, 4)
    before = snapshot(model)
    rng = torch.get_rng_state()
    report = gradscope.inspect(model, x, lambda out: out.pow(2).mean())
    after = snapshot(model)
    assert report.stats.params  # it really ran
    assert after["flags"] == before["flags"]
    assert all(after["grads"][n] is before["grads"][n] for n in before["grads"])
    assert torch.equal(after["grad_values"]["fc.weight"], before["grad_values"]["fc.weight"])
    assert after["modes"] == before["modes"]
    assert after["hooks"] == before["hooks"] == 0
    for n in before["buffers"]:
        assert torch.equal(after["buffers"][n], before["buffers"][n]), n
    for n in before["params"]:
        assert torch.equal(after["params"][n], before["params"][n]), n
    assert torch.equal(torch.get_rng_state(), rng)


def test_state_restored_when_forward_raises():
    class Boom(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)

        def forward(self, x):
            self.fc(x)
            raise ValueError("boom")

    model = Boom()
    with pytest.raises(UserCodeError, match="forward pass raised ValueError: boom"):
        gradscope.inspect(model, torch.randn(1, 2))
    assert sum(len(m._forward_hooks) for m in model.modules()) == 0


class Writer(nn.Module):
    """A forward that writes its parameters every way torch allows, then maybe raises."""

    def __init__(self, fail: bool):
        super().__init__()
        self.fc, self.data_written, self.out_written = (
            nn.Linear(3, 3),
            nn.Linear(3, 3),
            nn.Linear(3, 3),
        )
        self.rebound, self.untouched = nn.Linear(3, 3), nn.Linear(3, 3)
        self.out_written.requires_grad_(False)
        self.fail = fail

    def forward(self, x):
        with torch.no_grad():
            self.fc.weight.mul_(2)
            self.fc.bias += 1
        self.data_written.weight.data.clamp_(-0.01, 0.01)  # WGAN-style clipping in forward
        torch.add(x[0], 1, out=self.out_written.bias)
        self.rebound.weight.data.fill_(3.0)  # written, then its storage replaced
        self.rebound.weight.data = torch.zeros(3, 3)
        self.untouched.bias.data = self.untouched.bias.data[:2]  # a view of its own storage
        if self.fail:
            raise RuntimeError("boom")
        return (self.fc(x) + self.data_written(x) + self.rebound(x)).sum()


@pytest.mark.parametrize("copied_up_front", [True, False], ids=["copied", "guarded"])
@pytest.mark.parametrize("fail", [False, True])
def test_parameters_written_in_forward_are_put_back_bit_exactly(monkeypatch, copied_up_front, fail):
    """Both ways of keeping parameters: a small model's copied whole, a large one's guarded."""
    monkeypatch.setattr(preserve, "COPIED_UP_TO", 1 << 40 if copied_up_front else 0)
    model = Writer(fail)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    storages = {n: p.untyped_storage().data_ptr() for n, p in model.named_parameters()}
    versions = {n: p._version for n, p in model.named_parameters()}
    if fail:
        with pytest.raises(UserCodeError, match="boom"):
            gradscope.inspect(model, torch.randn(2, 3))
    else:
        gradscope.inspect(model, torch.randn(2, 3))
    for n, p in model.named_parameters():
        assert torch.equal(p, before[n]), n
        assert p.untyped_storage().data_ptr() == storages[n], n
    assert model.untouched.weight._version == versions["untouched.weight"]
    assert model.untouched.bias._version == versions["untouched.bias"]
    assert model.data_written.weight._version == versions["data_written.weight"]


def test_runs_under_no_grad_context_of_the_caller():
    model = nn.Linear(3, 1)
    with torch.no_grad():
        report = gradscope.inspect(model, torch.randn(4, 3))
    assert all(p.has_grad for p in report.stats.params)


def test_inplace_relu_model_works():
    model = nn.Sequential(
        nn.Conv2d(3, 4, 3), nn.ReLU(inplace=True), nn.Conv2d(4, 2, 3), nn.ReLU(inplace=True)
    )
    report = gradscope.inspect(model, torch.randn(2, 3, 8, 8))
    assert all(p.has_grad and p.finite for p in report.stats.params)


def test_non_scalar_output_with_gradient_weights():
    """Tutorial 2.2: y = w * x + b; y.backward(gradient_weights)."""

    class Affine(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.tensor([3.0, 3.0]))
            self.b = nn.Parameter(torch.tensor([1.0, 1.0]))

        def forward(self, x):
            return self.w * x + self.b

    x = torch.tensor([2.0, 2.0])
    weights = torch.tensor([0.1, 0.2])
    report = gradscope.inspect(Affine(), x, grad_outputs=weights)
    norms = {p.name: p.grad_norm for p in report.stats.params}
    assert norms["w"] == pytest.approx(math.hypot(0.2, 0.4))  # d/dw = x * weights
    assert norms["b"] == pytest.approx(math.hypot(0.1, 0.2))  # d/db = weights
    assert report.stats.loss_value is None
    assert "explicit gradient weights" in report.stats.loss_source
    with pytest.raises(TargetError, match="grad_outputs has shape"):
        gradscope.inspect(Affine(), x, grad_outputs=torch.ones(3))


@pytest.mark.parametrize(
    "output, source",
    [
        (lambda h: h.sum(), "scalar output"),
        (lambda h: {"loss": h.sum(), "logits": h}, 'output["loss"]'),
        (lambda h: h, "mean of the output"),
        (lambda h: (h, h * 2), "sum of the means of the 2 output tensors"),
    ],
)
def test_loss_discovery(output, source):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 2)

        def forward(self, x):
            return output(self.fc(x))

    report = gradscope.inspect(M(), torch.randn(4, 3))
    assert report.stats.loss_source.startswith(source)
    assert all(p.has_grad for p in report.stats.params)


def test_loss_that_does_not_require_grad():
    model = nn.Linear(3, 1)
    report = gradscope.inspect(model, torch.randn(2, 3), lambda out: out.detach().sum())
    assert {f.subject for f in report.findings if f.slug == "none-grad"} == {"weight", "bias"}


def test_backward_error_is_user_code_error():
    class BadBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            raise RuntimeError("bad backward")

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)

        def forward(self, x):
            return BadBackward.apply(self.fc(x)).sum()

    with pytest.raises(UserCodeError, match="backward pass raised RuntimeError: bad backward"):
        gradscope.inspect(M(), torch.randn(1, 2))


def test_shared_parameter_reported_once():
    lin = nn.Linear(4, 4)
    model = nn.Sequential(lin, nn.Tanh(), lin)
    report = gradscope.inspect(model, torch.randn(3, 4))
    assert [p.name for p in report.stats.params] == ["0.weight", "0.bias"]


def test_half_precision_norms_do_not_overflow():
    """bf16/fp16 gradients are reduced in float32: a norm above 65504 stays finite."""
    torch.manual_seed(0)
    model = nn.Linear(256, 256).to(torch.bfloat16)
    x = torch.randn(64, 256, dtype=torch.bfloat16) * 100
    report = gradscope.inspect(model, x, lambda out: out.float().pow(2).sum())
    weight = report.stats.params[0]
    assert weight.dtype == "bfloat16" and weight.finite
    model.zero_grad()
    model(x).float().pow(2).sum().backward()
    assert weight.grad_norm == pytest.approx(model.weight.grad.float().norm().item(), rel=1e-2)
    assert weight.grad_norm > 65504


def test_saved_bytes_and_retained_graph():
    class Caching(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(100, 10, bias=False)
            self.side = nn.Linear(100, 10)
            self.history = []

        def forward(self, x):
            out = self.fc(x)
            self.last = out  # the loss uses it: the backward freed its graph's buffers
            self.penalty = (self.fc.weight**2).sum()  # a term kept to sum into the loss
            self.aux = torch.tanh(self.side(x))  # off the loss's path: keeps its buffers
            self.history.append(out.sum())  # and gathers a graph a step
            self.safe = out.detach()  # fine
            return out.sum() + 1e-4 * self.penalty

    model = Caching()
    report = gradscope.inspect(model, torch.randn(32, 100))
    assert set(report.stats.retained) == {"aux", "history"}
    assert {f.subject for f in report.findings if f.slug == "graph-retained"} == {"aux", "history"}
    assert report.stats.saved_bytes >= 32 * 100 * 4  # mm saves its input
    plain = gradscope.inspect(nn.Linear(100, 10), torch.randn(32, 100))
    assert plain.stats.retained == () and plain.stats.saved_bytes > 0


class Checkpointed(nn.Module):
    """Two blocks: one checkpointed (its activations recomputed), one plain."""

    def __init__(self):
        super().__init__()
        self.inner, self.outer = nn.Linear(64, 64), nn.Linear(64, 64)
        self.calls = 0

    def block(self, x):
        self.calls += 1
        return torch.tanh(self.inner(x))

    def forward(self, x):
        h = torch.utils.checkpoint.checkpoint(self.block, x, use_reentrant=False)
        return CustomReLU.apply(self.outer(h)).sum()


def test_saved_bytes_counts_the_activations_the_graph_holds_and_nothing_else():
    model, x = Checkpointed(), torch.randn(16, 64)
    report = gradscope.inspect(model, x)
    # outer's input h (addmm), CustomReLU's input: 16x64 float32 each; the checkpointed
    # block's input and tanh output are recomputed, the weights are not activations
    assert report.stats.saved_bytes == 2 * 16 * 64 * 4
    assert model.calls == 2  # its forward and its recomputation in backward: reading the
    # graph unpacked nothing (that would have recomputed the block once more)


def test_large_gradients_get_exact_zero_and_non_finite_verdicts_from_their_norm(monkeypatch):
    """Above EXACT_MAX elements only the L2 norm is read, except where it says zero or NaN."""
    monkeypatch.setattr(fused_stats, "EXACT_MAX", 10)

    class Big(nn.Module):
        def __init__(self):
            super().__init__()
            self.live, self.dead, self.bad = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)
            self.emb = nn.Embedding(50, 8)  # untied lookup table: zero rows counted anyway

        def forward(self, idx):
            h = self.emb(idx)
            dead = self.dead(h) * 0.0
            bad = self.bad(h).sum() * torch.tensor(float("nan"))
            return self.live(h).sum() + dead.sum() + bad

    torch.manual_seed(0)
    model, idx = Big(), torch.tensor([1, 2, 3])
    run = probe.run(model, idx)
    by = {p.name: p for p in run.params}
    assert by["live.weight"].grad_max is None and by["live.weight"].zero_fraction is None
    assert by["live.weight"].finite and by["live.weight"].grad_norm > 0
    assert by["dead.weight"].grad_max == 0.0 and by["dead.weight"].zero_fraction == 1.0
    assert not by["bad.weight"].finite and math.isnan(by["bad.weight"].grad_max)
    assert by["emb.weight"].zero_fraction == pytest.approx(1 - 3 / 50)
    assert by["live.bias"].grad_max is not None  # 8 elements: measured
    assert by["live.bias"].zero_fraction is None  # a dense tensor: zeros not counted
    statuses = gradscope.inspect(model, idx).status
    assert statuses(by["dead.weight"]) == "zero" and statuses(by["live.weight"]) == "ok"


def test_a_tied_embedding_gets_no_zero_count(monkeypatch):
    """Tied to an output head, every row gets a gradient: no zero count is needed."""
    monkeypatch.setattr(fused_stats, "EXACT_MAX", 10)

    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.head = nn.Embedding(20, 4), nn.Linear(4, 20, bias=False)
            self.head.weight = self.emb.weight

        def forward(self, idx):
            return self.head(self.emb(idx)).logsumexp(-1).sum()

    (p,) = probe.run(Tied(), torch.tensor([1, 2])).params
    assert p.name == "emb.weight" and p.zero_fraction is None and p.grad_max is None


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize("fail", [False, True])
def test_garbage_collector_is_left_as_found(enabled, fail):
    import gc

    class Model(nn.Linear):
        def forward(self, x):
            assert gc.isenabled() is False  # paused for the pass
            if fail:
                raise RuntimeError("boom")
            return super().forward(x).sum()

    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        if fail:
            with pytest.raises(UserCodeError):
                probe.run(Model(2, 2), torch.randn(1, 2))
        else:
            probe.run(Model(2, 2), torch.randn(1, 2))
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_shard_statistics_combine_into_the_whole_tensors():
    """FSDP2 shards' numbers (the 2-rank run is in tests/distributed/test_dist_watch.py)."""
    combine = shard_stats.COMBINE
    assert combine["l2"]([3.0, 4.0]) == 5.0
    assert combine["sum"]([2.0, 5.0]) == 7.0
    assert (combine["min"]([-1.0, 2.0]), combine["max"]([-1.0, 2.0])) == (-1.0, 2.0)
    for how in ("l2", "min", "max", "sum"):  # one rank's NaN is the whole tensor's
        assert math.isnan(combine[how]([1.0, math.nan])), how
        assert math.isnan(combine[how]([math.nan, 1.0])), how
    assert combine["max"]([1.0, math.inf]) == math.inf


def test_summed_terms_reads_the_reduction_off_the_loss_graph():
    """How many terms a summed loss adds up; None for a mean or anything else."""
    y = torch.randn(4, 3, requires_grad=True)
    t = torch.randint(0, 3, (4,))
    zeros = torch.zeros(4, 3)
    cases = [
        (F.cross_entropy(y, t, reduction="sum"), 4),  # one term per target, not per class
        (F.cross_entropy(y, t), None),
        (F.mse_loss(y, zeros, reduction="sum"), 12),
        (F.binary_cross_entropy_with_logits(y, zeros, reduction="sum"), 12),
        (3 * y.pow(2).sum() + y.abs().sum(), 12),  # scalar arithmetic over two sums
        (y.pow(2).sum() + F.mse_loss(y, zeros), None),  # a sum and a mean: not known
        (F.nll_loss(y[0].log_softmax(-1), t[0], reduction="sum"), None),  # one term
        (y.max(), None),
        (y.sum(dim=(0, 1)), 12),
    ]
    for loss, terms in cases:
        assert probe.summed_terms(loss) == terms, loss.grad_fn
    assert probe.summed_terms(y.sum(0)) is None  # not a scalar
