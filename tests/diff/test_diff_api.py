"""gradscope.diff on small models: alignment, copying and restoring, tolerances, randomness."""

from __future__ import annotations

import json
import random

import pytest
import torch
from torch import nn

from gradscope.diff import diff
from gradscope.diff.align import name_map
from gradscope.diff.engine import DiffOptions
from gradscope.errors import TargetError
from gradscope.report.json import dumps


def mlp(seed: int, act: type[nn.Module] = nn.ReLU) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), act(), nn.Linear(8, 2))


X = torch.randn(5, 4, generator=torch.Generator().manual_seed(0))


def state(m: nn.Module):
    return (
        {k: v.clone() for k, v in m.state_dict().items()},
        [p.requires_grad for p in m.parameters()],
        [x.training for x in m.modules()],
        [None if p.grad is None else p.grad.clone() for p in m.parameters()],
    )


def same_state(a, b) -> bool:
    (sa, ra, ta, ga), (sb, rb, tb, gb) = a, b
    grads = all(
        (x is None and y is None) or (x is not None and y is not None and torch.equal(x, y))
        for x, y in zip(ga, gb, strict=True)
    )
    return all(torch.equal(sa[k], sb[k]) for k in sa) and ra == rb and ta == tb and grads


def test_different_init_is_identical_once_weights_are_copied():
    result = diff(mlp(0), mlp(1), X)
    assert not result.differs and result.bitwise
    assert [p.how for p in result.params] == ["name"] * 4


def test_both_models_and_the_rngs_are_left_as_found():
    ref, new = mlp(0), mlp(1, nn.Tanh)
    new[2].weight.requires_grad_(False)
    new.train()
    ref.eval()
    new[0].weight.grad = torch.ones_like(new[0].weight)
    before_ref, before_new = state(ref), state(new)
    torch_rng, py_rng = torch.get_rng_state(), random.getstate()
    result = diff(ref, new, X)
    assert result.differs
    assert same_state(before_ref, state(ref)) and same_state(before_new, state(new))
    assert torch.equal(torch_rng, torch.get_rng_state()) and py_rng == random.getstate()
    assert not new._forward_hooks and not new[0]._forward_pre_hooks


def test_the_seeded_module_is_found_and_located():
    result = diff(mlp(0), mlp(0, nn.Tanh), X)
    row = result.modules[result.origin]
    assert row.ref == "1" and row.kind == "ReLU ↔ Tanh"
    assert row.new_where.endswith(".py:" + row.new_where.rpartition(":")[2])
    assert result.findings[0].rule == "GS601"


def test_tolerances_rtol_and_exact():
    class Nudge(nn.Module):
        def forward(self, x):
            return x * (1 + 1e-6)

    ref = nn.Sequential(nn.Linear(4, 4), nn.Identity())
    new = nn.Sequential(nn.Linear(4, 4), Nudge())
    assert not diff(ref, new, X).differs  # 1e-6 relative: within float32's 1e-5
    exact = diff(ref, new, X, options=DiffOptions(exact=True))
    assert exact.differs and exact.modules[exact.origin].ref == "1"
    assert diff(ref, new, X, options=DiffOptions(rtol=1e-7, atol=0.0)).differs


def test_transposed_weight_is_reported_not_copied_unless_allowed():
    class T(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Parameter(torch.randn(8, 4))  # (out, in) as Linear

        def forward(self, x):
            return x @ self.fc.t()

    class C(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Parameter(torch.randn(4, 8))  # (in, out) as Conv1D

        def forward(self, x):
            return x @ self.fc

    torch.manual_seed(0)
    ref, new = T(), C()
    with pytest.raises(TargetError, match="no parameter"):
        diff(ref, new, X)  # the only pair is transposed: nothing else matches
    ref = nn.Sequential(nn.Linear(4, 4), T())
    new = nn.Sequential(nn.Linear(4, 4), C())
    plain = diff(ref, new, X)
    assert plain.differs and [f.rule for f in plain.findings if f.rule == "GS604"] == ["GS604"]
    assert "not copied" in plain.params[-1].note
    allowed = diff(ref, new, X, options=DiffOptions(allow_transposed=True))
    assert not allowed.differs
    assert "copied transposed" in next(f.message for f in allowed.findings if f.rule == "GS604")


def test_no_pairs_at_all_is_a_target_error():
    with pytest.raises(TargetError, match="name-map"):
        diff(nn.Linear(4, 2), nn.Sequential(nn.Linear(4, 3)), X)


def test_renamed_modules_pair_through_the_name_map():
    ref = mlp(0)
    torch.manual_seed(1)
    new = nn.Sequential()
    new.add_module("inp", nn.Linear(4, 8))
    new.add_module("act", nn.ReLU())
    new.add_module("out", nn.Linear(8, 2))
    names = name_map({"0.": "inp.", "1": "act", "2.": "out."})
    result = diff(ref, new, X, options=DiffOptions(names=names))
    assert not result.differs
    assert {r.ref: r.new for r in result.modules} == {"0": "inp", "1": "act", "2": "out", "": ""}


def test_unpaired_parameters_are_listed():
    ref = mlp(0)
    new = mlp(0)
    new.register_parameter("extra", nn.Parameter(torch.zeros(1)))
    result = diff(ref, new, X)
    assert result.alignment.new_only == ("extra",)
    assert any(f.rule == "GS606" for f in result.findings)


def test_inplace_input_and_shared_module_calls():
    class Shared(nn.Module):
        def __init__(self, inplace_bug: bool):
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.act = nn.ReLU(inplace=True)
            self.bug = inplace_bug

        def forward(self, x):
            y = self.act(self.fc(x))
            z = self.fc(y)  # the same module, a second call
            return z * 2 if self.bug else z

    result = diff(Shared(False), Shared(True), X)
    assert [r.label for r in result.modules] == ["fc", "act", "fc #2", "(model)"]
    assert result.modules[result.origin].ref == ""


def test_grad_only_difference_names_the_parameter():
    class Straight(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return 3 * g  # a wrong backward

    class M(nn.Module):
        def __init__(self, wrong: bool):
            super().__init__()
            self.a = nn.Linear(4, 4)
            self.b = nn.Linear(4, 2)
            self.wrong = wrong

        def forward(self, x):
            h = self.a(x)
            return self.b(Straight.apply(h) if self.wrong else h)

    result = diff(M(False), M(True), X)
    assert result.origin is None and result.differs
    assert result.params[result.first_grad].ref.startswith("a.")
    assert result.findings[0].rule == "GS602"


def test_autocast_against_itself():
    model = mlp(0)
    result = diff(model, model, X, options=DiffOptions(autocast="bfloat16"))
    assert result.setting == "autocast bfloat16"
    assert {r.output.dtype for r in result.modules if r.ref in ("0", "2")} == {"float32→bfloat16"}
    assert result.modules[0].output.tolerance.rtol == pytest.approx(1.6e-2)


def test_json_document():
    doc = json.loads(dumps(diff(mlp(0), mlp(0, nn.Tanh), X).to_dict()))
    assert doc["kind"] == "diff" and doc["version"] == 1
    assert doc["summary"]["origin"] == "1" and doc["summary"]["differs"] is True
    assert {"ref", "new", "output", "inputs", "ref_where"} <= set(doc["modules"][0])


def test_conv1d_against_linear_square_weight_hint():
    class Conv1D(nn.Module):
        def __init__(self, nx, nf):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(nx, nf))
            self.bias = nn.Parameter(torch.zeros(nf))

        def forward(self, x):
            return x @ self.weight + self.bias

    class Ref(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn, self.c_proj = Conv1D(4, 12), Conv1D(4, 4)

        def forward(self, x):
            return self.c_proj(self.c_attn(x)[..., :4])

    class Port(nn.Module):  # nn.Linear everywhere: (out, in) weights
        def __init__(self):
            super().__init__()
            self.c_attn, self.c_proj = nn.Linear(4, 12), nn.Linear(4, 4)
            self.extra = nn.Identity()

        def forward(self, x):
            return self.extra(self.c_proj(self.c_attn(x)[..., :4]))

    result = diff(Ref(), Port(), X, options=DiffOptions(allow_transposed=True))
    assert result.modules[result.origin].ref == "c_proj"  # c_attn, copied transposed, agrees
    hint = " ".join(result.findings[0].evidence)
    assert "c_proj.weight is square" in hint and "transposing" in hint
    assert result.alignment.modules_new_only == ("extra",) and "extra" in result.new_ran


def test_complex_outputs_compare():
    class Z(nn.Module):
        def __init__(self, conj: bool):
            super().__init__()
            self.conj = conj

        def forward(self, x):
            z = torch.complex(x, 2 * x)
            return z.conj() if self.conj else z

    class C(nn.Module):
        def __init__(self, conj: bool):
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.z = Z(conj)

        def forward(self, x):
            return self.z(self.fc(x)).real.sum()

    assert not diff(C(False), C(False), X).differs
    result = diff(C(False), C(True), X)  # the imaginary part differs: seen, not dropped
    assert result.modules[result.origin].ref == "z"


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch's own, while compiling
def test_compiled_against_itself():
    model = mlp(0, nn.GELU)
    before = state(model)
    result = diff(model, model, X, options=DiffOptions(compile=True))
    assert result.setting == "torch.compile"
    assert not result.differs, result.findings
    assert {r.new for r in result.modules} == {"_orig_mod.0", "_orig_mod.1", "_orig_mod.2", ""}
    assert same_state(before, state(model))
