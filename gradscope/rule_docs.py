"""Why each rule fires, how to see it fire and how to fix it: the long form of RULES.

`gradscope rules GS104` prints one entry; `python -m gradscope.rule_docs` writes the
rule table and these entries into docs/rules.md (`make docs`), so the reference and the
command read the same text. Keyed by rule id, next to gradscope/findings.py's registry:
a rule declared there adds its entry here (a test holds the two sets equal); a rule
declared with `@rule` on its check (gradscope/rules/registry.py: the watch family) brings
its own. No torch.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from gradscope.findings import RULES, TABLE, Rule
from gradscope.rules import registry
from gradscope.rules import watch as _watch  # noqa: F401  (declares the GS4xx rules)
from gradscope.rules.registry import RuleDoc, Stage

__all__ = ["DOCS", "STAGES", "RuleDoc", "doc_of", "markdown", "splice"]

STAGES = {
    Stage.RUN.value: "gradscope inspect: one forward and backward",
    Stage.BASELINE.value: "gradscope check --baseline: against a recorded run",
    Stage.GRADCHECK.value: "gradscope gradcheck: a custom autograd Function",
    Stage.WATCH.value: "gradscope watch: the steps of a training run",
    Stage.DISTRIBUTED.value: "gradscope watch under torchrun: DDP or FSDP2 ranks",
    Stage.DIFF.value: "gradscope diff: two models on one batch, or two runs' watch --log files",
}
"""Where a rule's findings come from, by `Rule.source`."""

_DDP = "gradscope watch gradscope/examples/ddp_train.py --nproc-per-node 2 -- "
_FN = "gradscope gradcheck gradscope.examples.functions:"
_DIFF = "gradscope diff tests/diff/diff_targets.py:gpt2_ref tests/diff/diff_targets.py:"

DOCS: dict[str, RuleDoc] = {
    "GS601": RuleDoc(
        why="Walking the module calls in execution order, the first whose output differs "
        "from the reference's beyond the dtype's tolerance while its inputs agree: the "
        "difference starts inside that module's forward (the first differing submodule input "
        "narrows it further).",
        example="a GPT-2 port whose block 1 forgets a residual",
        command=_DIFF + "gpt2_port_residual",
        fix="compare that module's forward line by line with the reference's: eps, "
        "activation variant, weight layout, scaling, residuals, dropout, dtypes",
    ),
    "GS602": RuleDoc(
        why="Every module output agrees within tolerance but a parameter's gradient differs: "
        "a backward differs.",
        example="a custom autograd Function, a detach, a hook or a straight-through trick in "
        "one model; or a setting (--b-autocast bf16) that changes a gradient",
        fix="check the backward of the module that owns the gradient; under a setting, keep "
        "that module in float32 or loosen --rtol knowingly",
    ),
    "GS603": RuleDoc(
        why="A module's output changes with the seed (each model's forward is repeated with "
        "another seed): randomness such as dropout is active there, so the comparison is "
        "noise.",
        example="attention dropout with training=True in the port",
        command=_DIFF + "gpt2_port_dropout",
        fix="compare in eval mode (model.eval()), or find the functional dropout with "
        "training=True",
    ),
    "GS604": RuleDoc(
        why="A weight pairs with the other model's only with its shape reversed; it is not "
        "copied unless --allow-transposed.",
        example="GPT-2's Conv1D (in, out) weights against nn.Linear (out, in)",
        fix="transpose it when loading it into the port",
    ),
    "GS605": RuleDoc(
        why="Two parameters share a name but their shapes are incompatible, so the weight is "
        "not copied.",
        example="a port built with another hidden size or vocabulary",
        fix="build the port with the reference's dimensions (hidden size, heads, vocabulary)",
    ),
    "GS606": RuleDoc(
        why="Parameters with no counterpart in the other model after pairing by name (wrapper "
        "prefixes such as module. and _orig_mod. are found by themselves).",
        example="a port that names its layers blocks.N where the reference says h.N",
        fix='pair renamed parameters with --name-map FILE ("ref_name" = "new_name"; a key '
        "ending in '.' renames a prefix)",
    ),
    "GS607": RuleDoc(
        why="Two watch --log runs, steps paired by number: the first step where the loss, the "
        "total gradient norm or a parameter's gradient norm differs from the reference's "
        "beyond |a-b| <= atol + rtol*|a| (rtol by dtype: 1e-4 float32, 1.6e-1 bfloat16; "
        "bitwise with --exact). The parameters that part first are ranked, and the gap's "
        "growth after it is measured.",
        example="the same script run with another learning rate from step 20, another seed, "
        "another data order or a frozen layer",
        fix="compare what the two runs did differently before that step; for runs meant to "
        "be identical, a non-deterministic kernel: torch.use_deterministic_algorithms(True)",
    ),
    "GS608": RuleDoc(
        why="Each run judged by itself, whatever the comparison says: its weights never moved "
        "(update norm 0 at every sampled step, or a learning rate of 0 throughout), or its "
        "median loss over the last steps is less than 5% below where it started (judged from "
        "20 logged losses, and not with several optimizers). An error when the weights never "
        "moved, or when a positive loss ended 10x or more above its first value (it blew up: "
        "the message says where it started and where it went); a warning when the weights "
        "moved and the loss stayed (a converged checkpoint fine-tuned further).",
        example="a run with lr=0 that matches, within a loose tolerance, a reference whose "
        "loss barely moves",
        fix="check the learning rate and that step() updates the model the loss is computed "
        'on; a loss not meant to fall (a converged checkpoint): ignore = ["GS608:*"]',
    ),
    "GS609": RuleDoc(
        why="Steps or parameters only one of the two runs logged: runs of different lengths "
        "(the common steps are compared), other logging intervals, names that do not pair.",
        example="a run stopped at step 40 against one of 60 steps",
        fix='nothing for lengths; pair renamed parameters with --name-map FILE ("ref_name" = '
        '"new_name")',
    ),
}


DOCS.update(registry.DOCS)


def doc_of(rule: Rule) -> RuleDoc | None:
    return DOCS.get(rule.id)


# --- docs/rules.md --------------------------------------------------------------------------

BEGIN = "<!-- generated by `make docs` (python -m gradscope.rule_docs): do not edit -->"
END = "<!-- end of generated rules -->"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown() -> str:
    """The rule table and one section per rule, from RULES, TABLE and DOCS."""
    rules = sorted(RULES.values(), key=lambda r: r.id)
    lines = [
        "| rule | slug | severity | stage | what it finds | table row |",
        "|---|---|---|---|---|---|",
    ]
    for r in rules:
        row = TABLE[r.row]
        lines.append(
            f"| [{r.id}](#{r.id.lower()}-{r.slug}) | {r.slug} | {r.severity} | {r.source} "
            f"| {_cell(r.summary)} | {_cell(row.symptom)} |"
        )
    for r in rules:
        lines += ["", f"### {r.id} {r.slug}", "", *_section(r)]
    return "\n".join(lines) + "\n"


def _section(r: Rule) -> list[str]:
    row, doc = TABLE[r.row], doc_of(r)
    out = [
        f"{r.severity} by default · {STAGES.get(r.source, r.source)} · {r.summary}.",
        "",
        f"Troubleshooting row: **{row.symptom}**; cause: {row.cause}; remedy: {row.remedy}.",
    ]
    if doc is None:
        return out
    out += ["", f"**Why it fires.** {doc.why}"]
    if doc.thresholds:
        out[-1] += " Tuned by " + ", ".join(f"`{k}`" for k in doc.thresholds) + "."
    out += ["", f"**Example.** {_sentence(doc.example)}"]
    if doc.command:
        out += ["", "```", doc.command, "```"]
    out += ["", f"**Fix.** {_sentence(doc.fix)}"]
    return out


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + ("" if text.endswith((".", ")")) else ".")


def splice(page: str, generated: str) -> str:
    """`page` with the text between BEGIN and END replaced by `generated`."""
    pattern = re.compile(re.escape(BEGIN) + r"\n.*?" + re.escape(END), re.S)
    if not pattern.search(page):
        raise ValueError(f"no generated block ({BEGIN} ... {END}) in the page")
    return pattern.sub(lambda _: f"{BEGIN}\n{generated}{END}", page, count=1)


def main(argv: list[str]) -> int:
    """python -m gradscope.rule_docs [docs/rules.md]: rewrite the page's generated block."""
    path = Path(argv[0] if argv else "docs/rules.md")
    page = path.read_text(encoding="utf-8")
    new = splice(page, markdown())
    if new != page:
        path.write_text(new, encoding="utf-8")
        print(f"{path}: rule table regenerated ({len(RULES)} rules)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
