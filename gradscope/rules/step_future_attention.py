"""GS471: a next-token model whose attention sees the future: its causal mask is missing or
wrong, so each position attends to later tokens, the one it predicts among them
(watcher/future_attention.py). No torch."""

from __future__ import annotations

from gradscope.config import Thresholds
from gradscope.findings import Finding, Severity
from gradscope.rules.registry import DECLARED, Rule, Stage, rule
from gradscope.rules.step_common import about, step_list
from gradscope.steps.records import WatchRun
from gradscope.steps.state_facts import FutureAttended

READS = 2
"""Steps read, each a leak, before it is said."""
SHARE = 0.01
"""Attention on later positions at least this share: a causal mask leaves exactly 0 there
(exp of -inf, or of a -1e4 fill, is 0), so a percent is a mask that lets the future in,
not rounding."""


@rule(
    "GS471",
    "future-attended",
    Severity.WARNING,
    "future-attended",
    Stage.WATCH,
    "watch: a next-token model's attention puts a real share of its queries' attention on "
    "later positions at the positions the loss counts: its causal mask is missing or wrong",
    example="a from-scratch GPT calling F.scaled_dot_product_attention(q, k, v) without "
    "is_causal=True; a hand-written attention whose masked_fill line was dropped or whose "
    "mask was built with triu; nn.TransformerEncoderLayer used as a decoder with no mask",
    fix="is_causal=True (scaled_dot_product_attention, TransformerEncoderLayer), a tril mask "
    "(att.masked_fill(tril[:T, :T] == 0, float('-inf'))), or "
    "attn_mask=nn.Transformer.generate_square_subsequent_mask(T)",
    objectives=(
        "a cross-entropy whose targets a token lookup (nn.Embedding) of the model read "
        "shifted by one (next-token prediction), and an attention whose queries and keys "
        "both come from that lookup: its share on later keys where the loss counts "
        "(ignore_index left out). A masked LM (targets not shifted), an encoder over a "
        "source (another lookup), a cross-attention (keys from the source), a prefix LM's "
        "ignored prefix and a classifier (one target per sequence) are not judged"
    ),
)
def future_attended(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """At the forwards of steps 1-3 the patched scaled_dot_product_attention (from its
    attn_mask and is_causal, q·kᵀ of the first batch element) and softmax of square
    attention scores measure, on the device, the share of each query position's attention
    on later keys, and which token lookups their queries and keys come from (a walk of
    their graphs to the EmbeddingBackward0 nodes). At the step's first backward GS445's
    reading says which lookups read the cross-entropy's targets shifted by one and which
    positions the loss counts. Where, at every step read (two at least), an attention over
    such a lookup puts 1% or more of its attention on later positions at the counted
    positions (a causal mask leaves exactly 0), the model sees the token it predicts: the
    loss falls toward 0 and generation is garbage. A position whose own token the loss
    ignores as a target (padding, a prompt) is left out: a left pad's query that a mask
    leaves no key spreads its softmax over every key. One finding names the first module
    (a module's second attention call as `MODULE (call 2)`); the others are in the
    evidence."""
    leaks = [f for f in run.state_facts.future_attended if _leaks(f)]
    if not leaks:
        return []
    return [_finding(leaks[0], [f.module for f in leaks[1:]], this)]


def _leaks(f: FutureAttended) -> bool:
    return (
        len(f.reads) >= READS
        and f.next_token == f.reads
        and all(share >= SHARE for share in f.shares)
    )


def _finding(f: FutureAttended, others: list[str], this: Rule) -> Finding:
    share = min(f.shares)
    message = (
        f"the queries of `{f.module}` put {share:.0%} of their attention on later positions "
        f"(at the positions the loss counts, at steps {step_list(list(f.reads))}) while the "
        "cross-entropy trains them to predict the next token: the causal mask is missing or "
        "wrong, so each position sees the token it is trained to predict; the loss falls "
        "toward 0 and generation is garbage"
    )
    advice = (
        "mask the future: F.scaled_dot_product_attention(q, k, v, is_causal=True); in a "
        "hand-written attention att.masked_fill(torch.tril(torch.ones(T, T)) == 0, "
        "float('-inf')) before the softmax (tril, not triu, sliced to the sequence's "
        "length); nn.TransformerEncoderLayer / nn.MultiheadAttention as a decoder: "
        "attn_mask=nn.Transformer.generate_square_subsequent_mask(T) (and is_causal=True)"
    )
    evidence = [
        "share of attention on later positions by step: "
        + ", ".join(f"{s}: {v:.1%}" for s, v in zip(f.reads, f.shares, strict=True))
    ]
    if others:
        evidence.append("also: " + ", ".join(f"`{m}`" for m in others))
    finding = this.finding(
        f.module,
        message,
        advice,
        value=share,
        threshold=SHARE,
        evidence=tuple(evidence),
    )
    return about(finding, list(f.reads[:2]))
