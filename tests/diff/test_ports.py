"""The usual port bugs, seeded one at a time into hand-written ports of HuggingFace GPT-2 and
Llama (built from tiny configs, no downloads): the difference must start at the seeded module."""

from __future__ import annotations

import sys

import pytest

from gradscope.diff import diff

sys.path.insert(0, __file__.rpartition("/")[0])
import diff_ports as ports

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def gpt2():
    return ports.gpt2_ref()


@pytest.fixture(scope="module")
def llama():
    return ports.llama_ref()


def test_correct_gpt2_port_matches_to_1e5(gpt2):
    ref, batch, loss_fn = gpt2
    result = diff(ref, ports.gpt2_port()[0], batch, loss_fn)
    assert not result.differs, result.findings
    assert result.origin is None and result.first_grad is None
    assert max(r.output.rel for r in result.modules if r.output) < 1e-5
    assert result.alignment.ref_only == () and result.alignment.new_only == ()
    assert result.passes == 2  # nothing differs: no second seed


@pytest.mark.parametrize("bug", sorted(ports.GPT2_BUG_AT))
def test_gpt2_port_bug_found_at_its_module(gpt2, bug):
    ref, batch, loss_fn = gpt2
    result = diff(ref, ports.gpt2_port([bug])[0], batch, loss_fn)
    assert result.differs
    assert result.modules[result.origin].ref == ports.GPT2_BUG_AT[bug]
    first = result.findings[0]
    assert first.rule == "GS601" and first.subject == ports.GPT2_BUG_AT[bug]
    if bug in ("scale", "residual", "dropout", "bf16", "transpose"):  # the port's own classes
        assert any("diff_ports.py:" in e for e in first.evidence)  # where its forward is


def test_missing_residual_points_inside_the_block(gpt2):
    ref, batch, loss_fn = gpt2
    result = diff(ref, ports.gpt2_port(["residual"])[0], batch, loss_fn)
    assert result.modules[result.first_input].ref == "h.1.ln_2"  # after attn, before ln_2


def test_dropout_left_on_is_named_as_randomness(gpt2):
    ref, batch, loss_fn = gpt2
    result = diff(ref, ports.gpt2_port(["dropout"])[0], batch, loss_fn)
    randomness = [f for f in result.findings if f.rule == "GS603"]
    assert [f.subject for f in randomness] == ["h.0.attn"]
    assert "reference's does not" in randomness[0].message
    assert result.passes == 4


def test_noise_limited_when_the_reference_itself_is_random(gpt2):
    _, batch, loss_fn = gpt2
    ref = ports.hf_gpt2().train()  # dropout on in the reference too
    result = diff(ref, ports.gpt2_port(["eps"])[0].train(), batch, loss_fn)
    notes = [f for f in result.findings if f.rule == "GS603"]
    assert any("noise-limited" in f.message and f.subject == "drop" for f in notes)


def test_correct_llama_port_matches(llama):
    ref, batch, loss_fn = llama
    result = diff(ref, ports.llama_port()[0], batch, loss_fn)
    assert not result.differs
    assert result.alignment.modules_ref_only == ("rotary_emb",)


@pytest.mark.parametrize("bug", sorted(ports.LLAMA_BUG_AT))
def test_llama_port_bug_found_at_its_module(llama, bug):
    ref, batch, loss_fn = llama
    result = diff(ref, ports.llama_port([bug])[0], batch, loss_fn)
    assert result.modules[result.origin].ref == ports.LLAMA_BUG_AT[bug]


def test_identical_models_are_bitwise_identical(gpt2):
    ref, batch, loss_fn = gpt2
    result = diff(ref, ports.hf_gpt2(), batch, loss_fn)
    assert result.bitwise and result.verdict() == "identical (bitwise)"


def test_hf_wrapper_prefix_is_found_from_the_names():
    """GPT2LMHeadModel names everything `transformer.*` (and ties lm_head to wte); the port
    has no prefix: the pairing finds ("transformer.", "") itself."""
    from transformers import GPT2LMHeadModel

    lm = GPT2LMHeadModel(ports.hf_gpt2().config).eval()

    def loss(out):
        return (out.logits if hasattr(out, "logits") else out).pow(2).mean()

    result = diff(lm, ports.gpt2_port(["gelu"])[0], {"input_ids": ports.ids()}, loss)
    assert result.alignment.prefixes == ("transformer.", "")
    assert len(result.alignment.pairs) == 28 and not result.alignment.new_only
    row = result.modules[result.origin]
    assert (row.ref, row.new) == ("transformer.h.0.mlp.act", "h.0.mlp.act")


def test_eps_bug_shows_both_settings_and_where_the_layer_is_made(gpt2):
    ref, batch, loss_fn = gpt2
    result = diff(ref, ports.gpt2_port(["eps"])[0], batch, loss_fn)
    row = result.modules[result.origin]
    assert "eps=1e-05" in row.settings and "eps=1e-06" in row.settings
    assert "diff_ports.py:" in row.new_made and "self.ln_1 = nn.LayerNorm" in row.new_made
    assert "modeling_gpt2.py:" in row.ref_made
    assert any(e.startswith("settings differ") for e in result.findings[0].evidence)
