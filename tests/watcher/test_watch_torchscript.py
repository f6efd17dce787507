"""A model exported with TorchScript mid-training (torch.jit.script, torch.jit.trace),
while the watch holds its forward hooks on it: the export works as it does without the
watch, carries the script's own hooks and none of gradscope's, and the watch keeps its
hooks on the model afterwards."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import gradscope


class Tagger(nn.Module):
    """An LSTM over [T, B] tokens: the noise scale hooks it, and its root."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(10, 8)
        self.rnn = nn.LSTM(8, 8)
        self.out = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, _ = self.rnn(self.emb(x))
        return self.out(h)


def halved(module: nn.Module, inputs: tuple[torch.Tensor], output: torch.Tensor) -> torch.Tensor:
    return output * 0.5


@pytest.fixture(scope="module")
def exported():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = _exported_while_watched()
    return got, [w for w in caught if "gradscope" in w.filename]


def _exported_while_watched():
    torch.manual_seed(0)
    model = Tagger()
    model.out.register_forward_hook(halved)  # the script's own: TorchScript compiles it
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gradscope.watch() as w:
        for _ in range(3):
            opt.zero_grad()
            for _ in range(2):  # two micro-batches: the noise scale hooks the model
                x = torch.randint(0, 10, (5, 2))
                model(x).pow(2).mean().backward()
            opt.step()
        hooks_before = [dict(m._forward_pre_hooks) for m in model.modules()]
        assert model._forward_pre_hooks and model.rnn._forward_pre_hooks  # watched
        scripted = torch.jit.script(model)
        traced = torch.jit.trace(model, torch.randint(0, 10, (4, 2)))
        hooks_after = [dict(m._forward_pre_hooks) for m in model.modules()]
        x = torch.randint(0, 10, (6, 3))
        with torch.no_grad():
            outputs = model(x), scripted(x), traced(x)
    return w.report, model, scripted, hooks_before, hooks_after, outputs


def test_script_and_trace_of_a_watched_model_export_it_as_without_the_watch(exported):
    report, model, scripted, before, after, (eager, by_script, by_trace) = exported[0]
    assert not report.faults
    assert report.run.status == "completed"
    assert after == before  # gradscope's hooks back on the model, in their order
    assert torch.allclose(by_script, eager) and torch.allclose(by_trace, eager)
    assert not model._forward_pre_hooks  # removed with the watch
    assert len(scripted.out._forward_hooks) == 1  # the script's own hook, compiled
    assert not scripted._forward_pre_hooks and not scripted.rnn._forward_pre_hooks


def test_the_trace_pass_runs_none_of_gradscopes_hooks(exported):
    """torch.jit.trace runs the model once: the watch's hooks read nothing of it, and no
    TracerWarning comes from gradscope's code."""
    ours = exported[1]
    assert not ours, [f"{w.filename}:{w.lineno}: {w.message}" for w in ours]


class Attending(nn.Module):
    """Attention and a cross-entropy written with every function the logits probe wraps."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(8, 24)
        self.out = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, -1)
        a = F.softmax(q @ k.transpose(-2, -1), dim=-1) @ v
        b = torch.softmax(q @ k.transpose(-2, -1), -1) @ v
        c = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        logits = self.out(a + b + c).mean(1)
        return F.cross_entropy(logits, y) + F.nll_loss(F.log_softmax(logits, -1), y)


def test_torchscript_compiles_a_forward_that_calls_the_wrapped_functions():
    """TorchScript compiles what a scripted forward calls: F.softmax and the other wrapped
    functions compile as torch's own (before, the wrappers' *args stopped the script with
    NotSupportedError), and TorchScript's table of builtins is as it was once the watch
    ends."""
    torch.manual_seed(0)
    model = Attending()
    x, y = torch.randn(4, 5, 8), torch.randint(0, 3, (4,))
    table = dict(torch.jit._builtins._get_builtin_table())
    with gradscope.watch() as w:
        scripted = torch.jit.script(model)
        opt = torch.optim.SGD(scripted.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            scripted(x, y).backward()
            opt.step()
    assert len(w.report.run.steps) == 3 and w.report.run.status == "completed"
    assert w.report.faults == ()  # nothing hooks the ScriptModule (it refuses Python hooks)
    assert torch.allclose(scripted(x, y), model(x, y))
    assert torch.jit._builtins._get_builtin_table() == table
    torch.jit.script(Attending())  # and after it


def test_inspect_of_a_scripted_model_measures_it_as_the_eager_one():
    """A TorchScript module refuses forward hooks and has no `get` on its tables: the
    pass hooks none of its modules and restores it all the same."""
    torch.manual_seed(0)
    eager = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    x = torch.randn(5, 4)
    before = [p.detach().clone() for p in eager.parameters()]
    scripted = gradscope.inspect(torch.jit.script(eager), x)
    plain = gradscope.inspect(eager, x)
    assert scripted.findings == [] and plain.findings == []
    norms = [[(p.name, p.grad_norm) for p in r.stats.params] for r in (scripted, plain)]
    assert norms[0] == norms[1]
    assert all(torch.equal(a, b) for a, b in zip(before, eager.parameters(), strict=True))
