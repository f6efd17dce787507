"""GS465: padding in the loss: a cross-entropy trained to predict the pad token at positions
where its model read padding (watcher/padding.py). No torch."""

from __future__ import annotations

from gradscope.config import Thresholds
from gradscope.findings import Finding, Severity
from gradscope.rules.registry import DECLARED, Rule, Stage, rule
from gradscope.rules.step_common import about, step_list
from gradscope.steps.records import WatchRun

READS = 2
"""Steps read, padding in the loss at every one, before it is said."""


@rule(
    "GS465",
    "padding-in-loss",
    Severity.WARNING,
    "padding-in-loss",
    Stage.WATCH,
    "watch: a cross-entropy's targets hold the pad token where the model's embedding read "
    "padding (its padding_idx): the labels' padding was not set to ignore_index",
    example="labels = input_ids.clone() for a padded batch, without "
    "labels[attention_mask == 0] = -100",
    fix="set the labels to -100 (the loss's ignore_index) wherever the attention mask is 0, "
    "as DataCollatorForLanguageModeling and DataCollatorForSeq2Seq do",
    objectives=(
        "a cross-entropy over class indices whose model reads tokens through an nn.Embedding "
        "with a padding_idx: targets equal to it where that embedding read it, ignore_index "
        "left out; a pad token that is also EOS, ignored after each row's real end, is silent, "
        "as are positions a per-position loss (reduction='none') weighs by 0 or masked_fill "
        "cuts right after it"
    ),
)
def padding_in_loss(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """A position where the embedding read its padding_idx and the counted target is that id
    is padding trained to predict padding: the model learns to emit padding after padding,
    and those easy tokens fill the loss's mean, so the real tokens' gradient shrinks by the
    share of padding and with it each batch's weight depends on how much it was padded.
    Said where every step read (two at least) had such positions."""
    out = []
    for c in run.state_facts.copies:
        steps = [p for p in c.padded if p[1] > 0]
        if len(c.padded) < READS or len(steps) != len(c.padded):
            continue
        out.append(_finding(c.padding, steps, this))
    return out


def _finding(pad: int, steps: list[tuple[int, int, int]], this: Rule) -> Finding:
    padded = sum(n for _, n, _ in steps)
    counted = sum(m for _, _, m in steps)
    message = (
        f"the cross-entropy is trained to predict the pad token (id {pad}, the embedding's "
        f"padding_idx) where the model read padding: {padded} of the {counted} targets counted "
        f"at the steps read ({step_list([s for s, _, _ in steps])}), "
        f"{100 * padded / max(counted, 1):.0f}%: the padding is in the loss, diluting the "
        "real tokens' gradient and teaching the model to emit padding"
    )
    advice = (
        "set the labels to -100 (ignore_index) wherever the attention mask is 0 "
        "(labels[attention_mask == 0] = -100), or use a collator that does"
    )
    finding = this.finding(
        "loss",
        message,
        advice,
        value=float(padded) / max(counted, 1),
        threshold=0.0,
        evidence=(f"targets and padded ids compared at steps {step_list([s for s, *_ in steps])}",),
    )
    return about(finding, [s for s, _, _ in steps[:2]])
