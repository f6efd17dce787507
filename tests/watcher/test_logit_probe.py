"""The logits probe (watcher/logit_probe.py): on a sampled step the largest attention
logit from q and k (causal positions, grouped heads) and from a softmax's masked scores,
the log-partition at cross_entropy and the head's and norm gains' weight norms with it,
each equal to a direct computation; the module named by the forward that called it;
nothing on the other steps; a failure of its own switches only the probe off."""

from __future__ import annotations

import math

import pytest
import torch
from watch_scripts import watched

from gradscope.watcher import logit_probe
from gradscope.watcher.logit_probe import LogitProbe


def _only(probe: LogitProbe):
    attention, output = probe.facts()
    return attention, output


def test_the_largest_attention_logit_is_that_of_q_and_k_on_the_causal_positions():
    torch.manual_seed(0)
    q, k = torch.randn(3, 4, 6, 8) * 3, torch.randn(3, 4, 6, 8) * 3
    probe = LogitProbe()
    probe.attend(16, q, k, None, True, [])
    probe.attend(16, q, k, None, True, [])  # a second micro-batch of the step: not again
    probe.attend(32, q, k, 0.5, False, [])
    (series,), _ = probe.facts()
    full = (q[0] @ k[0].transpose(-2, -1)).abs()
    causal = full.tril().amax().item() / math.sqrt(8)
    assert series.steps == (16, 32)
    assert series.maxima[0] == pytest.approx(causal, rel=1e-5)
    assert series.maxima[1] == pytest.approx(full.amax().item() * 0.5, rel=1e-5)
    assert full.amax().item() / math.sqrt(8) > causal  # the masked positions are left out


def test_grouped_query_heads_share_their_keys():
    q, k = torch.randn(2, 4, 5, 8), torch.randn(2, 2, 5, 8)
    probe = LogitProbe()
    probe.attend(16, q, k, None, False, [])
    (series,), _ = probe.facts()
    expected = (q[0] @ k[0].repeat_interleave(2, dim=0).transpose(-2, -1)).abs().amax()
    assert series.maxima[0] == pytest.approx(expected.item() / math.sqrt(8), rel=1e-5)


def test_softmax_scores_are_read_past_their_mask_and_other_softmaxes_are_not():
    scores = torch.randn(2, 2, 4, 4) * 5
    masked = scores.masked_fill(torch.ones(4, 4).triu(1).bool(), float("-inf"))
    probe = LogitProbe()
    probe.scores(16, masked, -1, [])
    probe.scores(32, torch.randn(2, 2, 4, 5), -1, [])  # not square: not q @ kᵀ
    probe.scores(32, torch.randn(8, 4), -1, [])  # a classifier's softmax
    probe.scores(32, scores, 1, [])  # another axis
    (series,), _ = probe.facts()
    assert series.steps == (16,)
    assert series.maxima[0] == pytest.approx(scores[0].tril().abs().amax().item(), rel=1e-6)


def test_the_log_partition_at_cross_entropy_is_logsumexp_over_the_classes():
    logits = torch.randn(6, 11, 3) * 4 + 2  # (N, C, d): classes on dim 1
    probe = LogitProbe()
    probe.cross_entropy(16, logits)
    probe.cross_entropy(16, logits * 100)  # the step's second call: not again
    probe.cross_entropy(32, torch.randn(11))
    _, output = probe.facts()
    z = torch.logsumexp(logits, dim=1)
    assert output.steps == (16, 32) and output.classes == 11
    assert output.mean[0] == pytest.approx(z.mean().item(), rel=1e-5)
    assert output.max[0] == pytest.approx(z.max().item(), rel=1e-5)


def test_a_large_batch_of_logits_is_measured_on_its_first_rows():
    logits = torch.cat([torch.zeros(logit_probe.MAX_ROWS, 5), torch.full((44, 5), 50.0)])
    probe = LogitProbe()
    probe.cross_entropy(16, logits)
    _, output = probe.facts()
    assert output.mean[0] == pytest.approx(math.log(5)) and output.max[0] < 2


def test_only_the_sampled_steps_are_measured():
    assert [s for s in range(1, 100) if logit_probe.sampled(s)] == [16, 32, 48, 64, 80, 96]
    assert not logit_probe.sampled(16_384 + 16) and logit_probe.sampled(16_384 + 256)


def test_a_watched_run_names_each_attention_module_and_reads_its_logits_once():
    report = watched("logit_heads.py", "40")
    facts = report.run.state_facts
    assert report.run.status == "completed"
    assert {s.module: s.steps for s in facts.attention} == {
        "fused": (16, 32),
        "manual": (16, 32),
    }
    assert all(0 < v < 50 for s in facts.attention for v in s.maxima)
    out = facts.output_logits
    assert out.steps == (16, 32) and out.classes == 11
    assert all(math.log(11) - 1 < m < math.log(11) + 3 for m in out.mean)
    assert not report.faults


def test_a_failure_of_the_probe_switches_only_the_probe_off(monkeypatch):
    from watch_scripts import script

    from gradscope.watcher import watch_script

    def broken(*args, **kw):
        raise RuntimeError("probe bug")

    monkeypatch.setattr(LogitProbe, "cross_entropy", broken)
    report = watch_script(script("logit_heads.py"), ["40"])
    assert report.run.status == "completed" and len(report.run.steps) == 40
    assert report.run.state_facts.output_logits is None
    assert [(f.part, f.step, f.whole) for f in report.faults] == [(logit_probe_part(), 16, False)]


def logit_probe_part() -> str:
    from gradscope.watcher.patches.logits import PART

    return PART


def test_a_model_with_qk_layernorm_is_judged_by_its_logits():
    """qk-layernorm whose gains grow (3% a step, nothing decays them): the logits grow
    all the same, and GS453 names the module; the same model's other attention, and the
    model without the growth, stay silent."""
    grown = watched("logit_heads.py", "320", "qknorm-grow")
    (f,) = [f for f in grown.findings if f.rule == "GS453"]
    assert f.subject == "fused" and f.steps[0] < 320
    assert "GS453" not in {f.rule for f in watched("logit_heads.py", "320").findings}


def test_a_compiled_forward_is_traced_once_not_once_a_step():
    """Inside torch.compile the patched calls only call what they wrap: reading the step
    there would guard the graph on it and recompile at every step (8 graphs, then the
    recompile limit)."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    from gradscope.watcher import watch

    torch._dynamo.reset()
    counters.clear()
    model = torch.nn.Linear(8, 5)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    @torch.compile(backend="eager")
    def loss_of(x, y):  # the tensor methods the watch shadows too
        scores = model(x).view(2, 1, 2, 5)[..., :2].softmax(-1).sum()
        nll = torch.nn.functional.nll_loss(model(x).log_softmax(-1), y)
        return torch.nn.functional.cross_entropy(model(x), y) + nll + scores

    with watch() as w:
        for _ in range(40):
            loss = loss_of(torch.randn(4, 8), torch.randint(0, 5, (4,)))
            opt.zero_grad()
            loss.backward()
            opt.step()
    torch._dynamo.reset()
    assert len(w.run.steps) == 40 and counters["stats"]["unique_graphs"] == 1


def test_a_call_outside_every_watched_module_is_named_by_its_function():
    def attention_by_hand(q, k):
        probe.attend(16, q, k, None, False, [])

    probe = LogitProbe()
    attention_by_hand(torch.randn(1, 2, 4, 8), torch.randn(1, 2, 4, 8))
    (series,), _ = probe.facts()
    assert series.module == "attention_by_hand()"


@pytest.mark.parametrize("way", ["method", "torch"])
def test_a_softmax_method_and_a_cross_entropy_in_two_calls_are_read(way):
    """`att.softmax(-1)`, `torch.softmax(att, -1)`; nll_loss over `logits.log_softmax(-1)`
    (a view of it) or F.log_softmax: the attention's logits and the log-partition as
    through F.softmax and F.cross_entropy."""
    report = watched("logit_calls.py", "40", way)
    facts = report.run.state_facts
    assert report.run.status == "completed" and not report.faults
    assert {s.module: s.steps for s in facts.attention} == {"attn": (16, 32)}
    assert all(0 < v < 50 for s in facts.attention for v in s.maxima)
    out = facts.output_logits
    assert out is not None and out.steps == (16, 32) and out.classes == 11
    assert all(math.log(11) - 1 < m < math.log(11) + 3 for m in out.mean)
    import torch as t

    assert "softmax" not in vars(t.Tensor) and "log_softmax" not in vars(t.Tensor)  # put back


def test_a_log_softmax_no_nll_loss_reads_is_no_cross_entropy():
    report = watched("logit_calls.py", "40", "other")
    assert report.run.status == "completed" and report.run.state_facts.output_logits is None


def test_nll_loss_reads_the_log_partition_of_the_log_softmax_it_was_given():
    logits = torch.randn(5, 7, 11) * 3 + 4
    out = logits.log_softmax(-1)
    probe = LogitProbe()
    probe.log_softmax(16, logits, out, -1)
    probe.nll_loss(16, out.view(-1, 11))
    probe.log_softmax(32, logits, out, -1)
    probe.nll_loss(32, torch.randn(35, 11).log_softmax(-1))  # another's log-probabilities
    _, output = probe.facts()
    z = torch.logsumexp(logits, -1)
    assert output.steps == (16,) and output.classes == 11
    assert output.mean[0] == pytest.approx(z.mean().item(), rel=1e-5)
    assert output.max[0] == pytest.approx(z.max().item(), rel=1e-5)


def test_names_bound_before_the_watch_are_read_and_put_back():
    """`from torch.nn.functional import scaled_dot_product_attention as sdpa` in a module
    imported before the watch started: read through that name too, and the name given its
    function back when the watch ends."""
    import torch.nn.functional as F

    from gradscope.watcher import watch
    from tests.watcher import logit_bound

    q = torch.randn(2, 1, 4, 8, requires_grad=True)
    opt = torch.optim.SGD([q], lr=0.1)
    with watch() as w:
        for _ in range(32):
            loss = logit_bound.attention_loss(q, q.detach() * 2, torch.randint(0, 8, (8,)))
            opt.zero_grad()
            loss.backward()
            opt.step()
    facts = w.run.state_facts
    assert [s.steps for s in facts.attention] == [(16, 32)]
    assert facts.output_logits is not None and facts.output_logits.classes == 8
    assert logit_bound.sdpa is F.scaled_dot_product_attention
    assert logit_bound.cross_entropy is F.cross_entropy


def test_the_heads_and_the_norm_gains_norms_are_sampled_with_the_log_partition():
    torch.manual_seed(0)
    emb, norm, head = torch.nn.Embedding(27, 8), torch.nn.LayerNorm(8), torch.nn.Linear(8, 27)
    model = torch.nn.Sequential(emb, norm, torch.nn.RMSNorm(8), head)
    probe, seen = LogitProbe(), []
    for step in (16, 32):
        probe.cross_entropy(step, model(torch.arange(5)), (model,))
        seen.append((head.weight.norm().item(), norm.weight.norm().item()))
        with torch.no_grad():
            head.weight.mul_(2.0)
            norm.weight.mul_(0.5)
    _, output = probe.facts()
    assert [(w.name, w.kind) for w in output.weights] == [
        ("3.weight", "head"),  # the last weight with a row per class, not the embedding
        ("1.weight", "norm gain"),
        ("2.weight", "norm gain"),
    ]
    got = list(zip(output.weights[0].norms, output.weights[1].norms, strict=True))
    assert got == [pytest.approx(s, rel=1e-5) for s in seen]  # as the forward saw them
    assert output.weights[2].norms == pytest.approx((8**0.5, 8**0.5))
    tied = torch.nn.Sequential(emb, torch.nn.Linear(8, 8))  # its head: the embedding
    probe = LogitProbe()
    probe.cross_entropy(16, tied(torch.arange(3)) @ emb.weight.T, (tied,))
    probe.cross_entropy(32, torch.randn(3, 27))
    (weight,) = probe.facts()[1].weights
    assert weight.name == "0.weight" and weight.kind == "head" and len(weight.norms) == 2
    unwatched = LogitProbe()  # no model known: the log-partition alone
    unwatched.cross_entropy(16, torch.randn(3, 27))
    assert unwatched.facts()[1].weights == ()
