"""One step, judged by what training would do next: routed experts, summed losses, LoRA
initialisations, the op that cut a router's graph, and models whose tensors are not plain
floats (an int8 base, lazy modules, the meta device). Plain autograd is the oracle."""

from __future__ import annotations

import math
import sys
import textwrap

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import gradscope
from gradscope import Severity
from gradscope.cli import app

sys.path.insert(0, __file__.rpartition("/")[0])
from zoo import VAE, mnist_like, switch_transformer, vae_loss


def loud(report):
    return [f for f in report.findings if f.severity >= Severity.WARNING]


def plain_grads(model, batch, loss_fn=None):
    """Which parameters get a gradient, and its norm, in plain training."""
    model.zero_grad(set_to_none=True)
    out = model(**batch) if isinstance(batch, dict) else model(batch)
    (out.loss if loss_fn is None else loss_fn(out)).backward()
    got = {n: None if p.grad is None else p.grad.norm().item() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    return got


# --- experts a router sent no tokens to -------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("base", [False, True], ids=["for-conditional-generation", "model"])
def test_switch_transformer_experts_without_tokens_are_routing_not_errors(base):
    pytest.importorskip("transformers")
    model, batch, loss_fn = switch_transformer(base)
    truth = plain_grads(model, batch, loss_fn)
    idle = {n for n, g in truth.items() if g is None}
    assert idle and all(".experts.expert_" in n for n in idle)  # the premise, by plain autograd
    report = gradscope.inspect(model, batch, loss_fn)
    assert loud(report) == [], [f.message for f in loud(report)]
    routed = {f.subject: f for f in report.findings if f.slug == "idle-expert"}
    assert set(routed) == idle
    f = routed[min(idle)]
    assert f.severity is Severity.INFO and f.rule == "GS109"
    assert "got no tokens from the router" in f.message and "router.classifier" in f.message


class TopKMoE(nn.Module):
    """A hand-written top-k mixture: a gate, experts run on the tokens routed to them."""

    def __init__(self, d: int = 16, n: int = 8, k: int = 1, every_expert: bool = False):
        super().__init__()
        self.gate = nn.Linear(d, n, bias=False)
        self.experts = nn.ModuleList(
            nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d)) for _ in range(n)
        )
        self.k, self.every_expert = k, every_expert
        self.head = nn.Linear(d, 1)

    def forward(self, x):
        weights, chosen = self.gate(x).softmax(-1).topk(self.k, dim=-1)
        out = torch.zeros_like(x)
        for i, expert in enumerate(self.experts):
            rows, slot = (chosen == i).nonzero(as_tuple=True)
            if len(rows) or self.every_expert:  # every_expert: an empty batch for the idle ones
                out = out.index_add(0, rows, expert(x[rows]) * weights[rows, slot, None])
        return self.head(x + out).pow(2).mean()


@pytest.mark.parametrize("every_expert", [False, True], ids=["skipped", "empty-batch"])
def test_hand_written_top_k_moe_idle_experts_are_info(every_expert):
    torch.manual_seed(0)
    model, x = TopKMoE(every_expert=every_expert), torch.randn(3, 16)
    truth = plain_grads(model, x, lambda out: out)
    idle = {n for n, g in truth.items() if not g}  # None (skipped) or all-zero (empty batch)
    assert idle and all(n.startswith("experts.") for n in idle)
    report = gradscope.inspect(model, x)
    assert loud(report) == [], [f.message for f in loud(report)]
    assert {f.subject for f in report.findings if f.slug == "idle-expert"} == idle


class SkippedLayer(nn.Module):
    """Not a mixture: a stack of identical layers, the last never called (a real bug)."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(8, 8) for _ in range(4))

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = torch.relu(layer(x))
        return x.pow(2).mean()


def test_a_skipped_layer_among_identical_siblings_stays_an_error():
    report = gradscope.inspect(SkippedLayer(), torch.randn(2, 8))
    errors = [f.subject for f in report.findings if f.slug == "none-grad"]
    assert errors == ["layers.3.weight", "layers.3.bias"]
    assert all(f.severity is Severity.ERROR for f in report.findings if f.slug == "none-grad")


# --- a loss reduced by sum --------------------------------------------------------------------


def test_vae_with_a_summed_loss_is_not_exploding():
    torch.manual_seed(0)
    model, x = VAE(), mnist_like()
    loss_fn = vae_loss(x)
    torch.manual_seed(1)  # the same noise in both passes
    truth = plain_grads(model, x, loss_fn)
    assert math.sqrt(sum(g * g for g in truth.values())) > 1e3  # an absolute bound would fire
    torch.manual_seed(1)
    report = gradscope.inspect(model, x, loss_fn)
    assert report.findings == [], [f.message for f in report.findings]
    assert report.stats.loss_terms == 128 * 20  # KLD's terms: the fewer of the two sums
    got = {p.name: p.grad_norm for p in report.stats.params}
    assert got == pytest.approx(truth, rel=1e-4)


def test_a_real_explosion_under_a_summed_loss_still_fires():
    from gradscope.examples.models import exploding_deep

    model, x, _ = exploding_deep()
    y = torch.randint(0, 5, (x.shape[0],), generator=torch.Generator().manual_seed(0))
    report = gradscope.inspect(model, x, lambda out: F.cross_entropy(out, y, reduction="sum"))
    assert report.stats.loss_terms == x.shape[0]
    fired = {f.subject for f in report.findings if f.slug == "exploding"}
    assert {"0.weight", "2.weight"} <= fired
    assert "per term of the loss, which adds up" in report.findings[0].message


def test_a_large_loss_that_is_a_mean_keeps_the_absolute_bound():
    """Only a sum is judged per term: a mean's gradients are what they are."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 512), nn.Linear(512, 512), nn.Linear(512, 64))
    with torch.no_grad():
        for layer in model:
            layer.weight.mul_(30)
    x = torch.randn(32, 64)
    report = gradscope.inspect(model, x, lambda out: out.pow(2).mean())
    assert report.stats.loss_terms is None
    assert [f.subject for f in report.findings if f.slug == "exploding"] != []


# --- LoRA: a zero init one step fixes, and one no step ever fixes ------------------------------


class LoRALinear(nn.Module):
    """A frozen base and a trainable low-rank update x A^T B^T, as in the LoRA paper."""

    def __init__(self, d_in: int, d_out: int, r: int = 4, a_init: str = "kaiming"):
        super().__init__()
        self.base = nn.Linear(d_in, d_out).requires_grad_(False)
        self.lora_A = nn.Parameter(torch.empty(r, d_in))
        self.lora_B = nn.Parameter(torch.zeros(d_out, r))
        if a_init == "kaiming":
            nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        else:
            nn.init.zeros_(self.lora_A)

    def forward(self, x):
        return self.base(x) + x @ self.lora_A.T @ self.lora_B.T


def lora_mlp(a_init: str):
    torch.manual_seed(0)
    return nn.Sequential(
        LoRALinear(16, 32, a_init=a_init), nn.GELU(), LoRALinear(32, 4, a_init=a_init)
    )


def test_standard_lora_init_is_info_that_one_step_resolves():
    report = gradscope.inspect(lora_mlp("kaiming"), torch.randn(4, 16), lambda o: o.pow(2).mean())
    assert loud(report) == [], [f.message for f in loud(report)]
    assert {f.slug for f in report.findings} == {"zero-init", "frozen"}


def test_lora_with_both_factors_zero_is_stuck_forever():
    model, x = lora_mlp("zeros"), torch.randn(4, 16)
    truth = plain_grads(model, x, lambda o: o.pow(2).mean())
    factors = {n for n in truth if "lora_" in n}
    assert all(truth[n] == 0 for n in factors)  # and an SGD/Adam step of zero leaves them so
    report = gradscope.inspect(model, x, lambda o: o.pow(2).mean())
    stuck = {f.subject: f for f in report.findings if f.slug == "zero-grad"}
    assert set(stuck) == factors
    assert all(f.severity >= Severity.WARNING for f in stuck.values())
    assert "stuck at zero" in stuck["0.lora_A"].message
    assert "kaiming" in stuck["0.lora_A"].advice
    assert "zero-init" not in {f.slug for f in report.findings}


@pytest.mark.slow
@pytest.mark.parametrize("both_zero", [False, True], ids=["peft-default", "peft-both-zero"])
def test_peft_lora_on_a_tiny_transformer(both_zero):
    hf = pytest.importorskip("transformers")
    peft = pytest.importorskip("peft")
    torch.manual_seed(0)
    config = hf.LlamaConfig(
        vocab_size=100,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=64,
    )
    base = hf.LlamaForCausalLM(config)
    model = peft.get_peft_model(
        base, peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
    ).train()
    if both_zero:
        for name, p in model.named_parameters():
            if "lora_A" in name:
                nn.init.zeros_(p)
    ids = torch.randint(0, 100, (2, 12), generator=torch.Generator().manual_seed(0))
    report = gradscope.inspect(model, {"input_ids": ids, "labels": ids})
    factors = {n for n, p in model.named_parameters() if "lora_" in n}
    if not both_zero:
        assert loud(report) == [], [f.message for f in loud(report)]
        assert {f.slug for f in report.findings} == {"zero-init", "frozen"}
        return
    stuck = {f.subject for f in report.findings if f.slug == "zero-grad"}
    assert stuck == factors
    assert all(f.severity >= Severity.WARNING for f in report.findings if f.slug == "zero-grad")


def peft_bert_classifier():
    """BERT for sequence classification with peft LoRA on query and value: the LoRA factors
    and a full classifier head (modules_to_save) are trained."""
    hf = pytest.importorskip("transformers")
    peft = pytest.importorskip("peft")
    torch.manual_seed(0)
    config = hf.BertConfig(
        vocab_size=128,
        hidden_size=64,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=128,
        num_labels=3,
    )
    lora = peft.LoraConfig(r=8, target_modules=["query", "value"], task_type="SEQ_CLS")
    model = peft.get_peft_model(hf.BertForSequenceClassification(config), lora).train()
    return model, [
        {"input_ids": torch.randint(0, 128, (4, 16)), "labels": torch.randint(0, 3, (4,))}
        for _ in range(5)
    ]


@pytest.mark.slow
def test_peft_lora_classifier_is_not_vanishing_at_step_1_or_after():
    """At step 1 every query's LoRA B gets ~1e-5x the head's gradient (near-uniform attention
    at init), in every layer alike; after a step each A's gradient is as small as its B,
    just moved from zero. Neither is a gradient fading with depth."""
    model, batches = peft_bert_classifier()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-4)
    for i, batch in enumerate(batches):
        report = gradscope.inspect(model, batch)
        assert loud(report) == [], (i, [f.message for f in loud(report)])
        model(**batch).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def test_vanishing_under_lora_adapters_still_fires():
    """A deep sigmoid stack with a LoRA update on each layer: the gradient really fades, and
    the B factors (whose gradient does not pass through a partner) show it."""
    torch.manual_seed(0)
    layers: list[nn.Module] = [nn.Linear(16, 32), nn.Sigmoid()]
    for _ in range(14):
        layers += [LoRALinear(32, 32), nn.Sigmoid()]
    model, x, y = nn.Sequential(*layers, nn.Linear(32, 4)), torch.randn(4, 16), torch.arange(4)
    loss_fn = lambda out: F.cross_entropy(out, y)  # noqa: E731
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    for _ in range(2):  # at step 1 and after steps (B no longer zero)
        report = gradscope.inspect(model, x, loss_fn)
        vanishing = {f.subject for f in report.findings if f.slug == "vanishing"}
        assert {"0.weight", "2.lora_B"} <= vanishing
        loss_fn(model(x)).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


# --- the op that cut a router's graph ----------------------------------------------------------


class Gated(nn.Module):
    """A router whose decision is made by a non-differentiable op; the next line reads a
    shape (no values leave there: it is not the cut)."""

    def __init__(self, how: str):
        super().__init__()
        self.how = how
        self.router, self.expert = nn.Linear(8, 4), nn.Linear(8, 8)

    def forward(self, x):
        logits = self.router(x)
        if self.how == "argmax":
            gate = F.one_hot(logits.argmax(-1), 4).float()  # cut: argmax
        elif self.how == "topk":
            gate = torch.zeros_like(logits).scatter(-1, logits.topk(2).indices, 1.0)  # cut: topk
        elif self.how == "long":
            gate = logits.long().clamp(0, 1).float()  # cut: long
        elif self.how == "compare":
            gate = (logits > 0).float()  # cut: >
        else:
            gate = torch.round(logits.sigmoid())  # cut: round
        width = logits.shape[-1]
        return (self.expert(x) * gate.sum(-1, keepdim=True) / width).sum()


@pytest.mark.parametrize(
    "how,op",
    [
        ("argmax", "argmax"),
        ("topk", "topk"),
        ("long", "long"),
        ("compare", "gt"),
        ("round", "round"),
    ],
)
def test_the_cut_is_blamed_on_the_op_that_made_it_at_its_own_line(how, op):
    torch.manual_seed(0)
    model, x = Gated(how), torch.randn(3, 8)
    truth = plain_grads(model, x, lambda out: out)
    report = gradscope.inspect(model, x)
    found = [f for f in report.findings if f.subject.startswith("router.")]
    assert [f.subject for f in found] == ["router.weight", "router.bias"]
    # round keeps the graph (its derivative is zero): a zero gradient, not a missing one
    assert {f.slug for f in found} == ({"zero-grad"} if how == "round" else {"none-grad"})
    assert (truth["router.weight"] == 0) if how == "round" else truth["router.weight"] is None
    source = open(__file__).read().splitlines()
    for f in found:  # round also names its op in the graph (flat_off): the line is the other
        (evidence,) = [e for e in f.evidence if "test_single_step.py:" in e]
        assert f"`{op}`" in evidence or f"`__{op}__`" in evidence, evidence
        line = int(evidence.split("test_single_step.py:")[1].split()[0].rstrip(",:"))
        assert f"# cut: {'>' if op == 'gt' else op}" in source[line - 1], (
            evidence,
            source[line - 1],
        )


# --- tensors that are not plain floats: an int8 base, lazy modules, the meta device -------------


class Int8LoRA(nn.Module):
    """A weight-only int8 base (int8 values, a float scale per row) as bitsandbytes-style and
    torch.ao weight-only quantisation store it, frozen, under a LoRA update; or float8
    (e4m3) values the same way."""

    def __init__(self, d_in: int, d_out: int, r: int = 4, dtype: torch.dtype = torch.int8):
        super().__init__()
        w = torch.randn(d_out, d_in)
        scale = w.abs().amax(1, keepdim=True) / 127
        self.weight = nn.Parameter((w / scale).round().to(dtype), requires_grad=False)
        self.register_buffer("scale", scale)
        self.register_buffer("zero_point", torch.zeros(d_out, dtype=torch.int8))
        self.lora_A = nn.Parameter(torch.empty(r, d_in))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        self.lora_B = nn.Parameter(torch.zeros(d_out, r))

    def forward(self, x):
        w = (self.weight.float() - self.zero_point[:, None].float()) * self.scale
        return x @ w.T + x @ self.lora_A.T @ self.lora_B.T


def int8_model(dtype: torch.dtype = torch.int8):
    torch.manual_seed(0)
    return nn.Sequential(Int8LoRA(16, 32, dtype=dtype), nn.GELU(), Int8LoRA(32, 4, dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.int8, torch.float8_e4m3fn], ids=["int8", "float8"])
def test_quantized_frozen_base_is_not_a_gradient_to_measure(dtype):
    model, x = int8_model(dtype), torch.randn(4, 16)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    report = gradscope.inspect(model, x, lambda o: o.pow(2).mean())
    assert loud(report) == [], [f.message for f in loud(report)]
    base = {p.name: p for p in report.stats.params if p.name.endswith(".weight")}
    assert set(base) == {"0.weight", "2.weight"}
    for name, p in base.items():
        assert p.dtype == str(dtype).removeprefix("torch.")
        assert not p.requires_grad and not p.has_grad
        stored = model.get_parameter(name).double().norm().item()
        assert p.weight_norm == pytest.approx(stored)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def lazy_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.LazyLinear(8), nn.ReLU(), nn.LazyLinear(2))


def test_lazy_modules_are_materialised_by_the_forward_as_a_first_call_would():
    model, x = lazy_model(), torch.randn(4, 5)
    rng = torch.get_rng_state()
    report = gradscope.inspect(model, x, lambda o: o.pow(2).mean())
    assert torch.equal(torch.get_rng_state(), rng)
    assert type(model[0]) is nn.Linear and model[0].weight.shape == (8, 5)  # materialised
    assert all(p.grad is None for p in model.parameters())
    truth = plain_grads(model, x, lambda o: o.pow(2).mean())
    assert {p.name: p.grad_norm for p in report.stats.params} == pytest.approx(truth, rel=1e-5)
    assert loud(report) == []


TARGETS = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {here!r})
    import torch
    from torch import nn
    from test_single_step import int8_model, lazy_model

    def int8():
        return int8_model(), torch.randn(4, 16), lambda o: o.pow(2).mean()

    def lazy():
        return lazy_model(), torch.randn(4, 5), lambda o: o.pow(2).mean()

    def meta():
        with torch.device("meta"):
            model = nn.Linear(5, 2)
        return model, torch.randn(4, 5)
    """
)


@pytest.mark.parametrize("name,code", [("int8", 0), ("lazy", 0), ("meta", 2)])
def test_cli_exit_codes(tmp_path, name, code):
    from typer.testing import CliRunner

    here = __file__.rpartition("/")[0]
    (tmp_path / "targets.py").write_text(TARGETS.format(here=here))
    result = CliRunner().invoke(app, ["inspect", f"{tmp_path}/targets.py:{name}"])
    assert result.exit_code == code, result.output
    if code == 2:
        (line,) = result.stderr.strip().splitlines()
        assert "meta device" in line and "internal error" not in line
