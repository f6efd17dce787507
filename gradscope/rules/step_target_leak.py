"""GS445: the targets leak into the input: a cross-entropy trained to predict, at each
position, the very token an embedding of the model read there (watcher/target_leak.py).
The model learns to copy and the loss falls to ~0 at once. No torch."""

from __future__ import annotations

import math

from gradscope.config import Thresholds
from gradscope.findings import Finding, Severity
from gradscope.fmt import num
from gradscope.rules.registry import DECLARED, Rule, Stage, rule
from gradscope.rules.step_common import about, step_list
from gradscope.steps.records import WatchRun
from gradscope.steps.state_facts import TargetCopies

READS = 2
"""Steps read, every one a copy, before it is said: one batch's coincidence is none."""


@rule(
    "GS445",
    "target-in-input",
    Severity.WARNING,
    "target-in-input",
    Stage.WATCH,
    "watch: a cross-entropy's targets are, position for position, the token ids an "
    "embedding of the model read at the same step: teacher forcing without the shift",
    example="nanoGPT's batch with y = x where y = data[i + 1 : i + 1 + block] is meant; "
    "a captioning decoder fed the caption it is trained to predict",
    fix="shift by one: feed tokens[:, :-1] and predict tokens[:, 1:] (or shift the labels "
    "inside the model, as Hugging Face's causal LMs do)",
    objectives=(
        "a cross-entropy over class indices (F.cross_entropy or nll_loss, or log-probabilities "
        "gathered by the targets along the class axis, as a masked diffusion writes it) whose "
        "model reads tokens through nn.Embedding: "
        "the targets against the ids at the same positions (ignore_index left out); an "
        "embedding that reaches the loss only through a pooled or repeated code, a "
        "recurrent layer's final state or its positions flattened into one vector (an "
        "autoencoder's bottleneck) is not held, nor one whose encoded states are moved a "
        "position later (a point process's state before each event), nor one "
        "whose run also feeds the targets shifted by one (a seq2seq autoencoder's "
        "teacher-forced decoder); masked and denoising objectives differ where it counts"
    ),
)
def target_in_input(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """torch's graph keeps a cross-entropy's targets (NllLossBackward0, or GatherBackward0's
    index where the log-probabilities are gathered by hand) and the token ids
    each embedding read (EmbeddingBackward0). At the first backward of steps 1-3 and of
    pairs every 25 (every 500 after step 101) they are compared on the device, read back
    once at the end. Where at every step read (two at least) an embedding that reaches the
    loss through the positions themselves (no reduction, select, expand or repeat over
    them, no recurrent layer's final state, no flatten of them into one vector on the way:
    a bottleneck) read exactly the
    targets at every position that counts, and no embedding read them shifted by one, the
    model is handed the answer: it learns to copy its input, the loss falls to ~0 within
    a few steps and generation produces nothing. A masked LM (its masked positions read
    [MASK]), a denoising objective (its corrupted positions differ) and an autoencoder
    whose code passes a bottleneck stay silent."""
    out = []
    for c in run.state_facts.copies:
        if len(c.reads) < READS or c.copied != c.reads or c.shifted:
            continue
        out.append(_finding(run, c, this))
    return out


def _finding(run: WatchRun, c: TargetCopies, this: Rule) -> Finding:
    losses = [(s.step, s.loss) for s in run.steps if s.loss is not None and math.isfinite(s.loss)]
    fall = ""
    if len(losses) > 1:
        fall = (
            f"; the loss went from {num(losses[0][1])} at step {losses[0][0]} to "
            f"{num(losses[-1][1])} at step {losses[-1][0]}"
        )
    table = f" ({c.table})" if c.table else ""
    message = (
        f"the cross-entropy's targets are the token ids the model's nn.Embedding{table} read "
        f"at the same positions, at every step read ({step_list(list(c.reads))}){fall}: the "
        "model is fed the answer and learns to copy it (teacher forcing without the shift, "
        "or a denoiser fed the clean tokens)"
    )
    advice = (
        "shift the targets by one position: inputs = tokens[:, :-1], targets = tokens[:, 1:] "
        "(nanoGPT: y = data[i + 1 : i + 1 + block_size]); a decoder's input starts with BOS "
        "and drops the last token; a masked or denoising model (MDLM, D3PM) is fed the "
        "corrupted tokens x_t, not the clean x_0 it predicts; if the model must reconstruct "
        "its input by design, pass it through a bottleneck (a pooled code), or ignore this"
    )
    finding = this.finding(
        "loss",
        message,
        advice,
        value=float(len(c.copied)),
        threshold=float(READS),
        evidence=(f"targets and embedding ids compared at steps {step_list(list(c.reads))}",),
    )
    return about(finding, list(c.reads[:2]))
