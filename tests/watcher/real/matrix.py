"""Real project × seeded bug class under `watch`, judged by what a right verdict says.

    python -m tests.watcher.real.matrix [CASE ...]      # markdown table on stdout

Each row is one case of `runs.py` run under `watch_script` (once per process). Columns:

- caught: a finding at or above the class's severity (warning; info for a frozen layer,
  whose finding must name it); for a healthy run, that nothing is at warning or above;
- named: the class's rule id is among the findings (about the frozen layer, if any);
- cause-first: that finding leads the report (the findings about the frozen layer, for that
  class), and no finding >= warning advises lowering the learning rate where the learning
  rate is not the cause (an info remark that hedges is not advice that contradicts it);
- right step: the named finding's first step lies in the class's window.

The rule ids are those issue 26 asks for (GS418-GS422, and GS412 for every missing reset);
`test_real_meaning.py` holds each row to all four columns.
"""

from __future__ import annotations

import contextlib
import re
import sys
import time
from dataclasses import dataclass, field

from gradscope.findings import Finding, Severity

from . import runs


@dataclass(frozen=True)
class Expect:
    """What a right verdict on one bug class says."""

    rule: str | None
    """The rule that names the cause; None for a healthy run (no finding >= warning)."""
    severity: Severity = Severity.WARNING
    """The least severity that counts as caught."""
    window: tuple[int, int] | None = None
    """First and last step at which the named finding may start; None: not judged."""
    lr_cause: bool = False
    """The learning rate is the cause, so advice to lower it is right."""


CLASSES: dict[str, Expect] = {
    "healthy": Expect(None),
    "clip absorbs spikes (healthy)": Expect(None),
    "lr too high": Expect("GS419", window=(1, 10), lr_cause=True),
    "loss maximised": Expect("GS418", window=(1, 1)),
    "decay too strong": Expect("GS420", window=(1, 10)),
    "frozen in optimizer": Expect("GS421", severity=Severity.INFO),
    "zero_grad before step": Expect("GS422", window=(1, 1)),
    "no zero_grad, manual update": Expect("GS412", window=(2, 2)),
    "no zero_grad": Expect("GS412", window=(2, 2)),
}


@dataclass(frozen=True)
class Row:
    project: str
    bug: str
    """A key of CLASSES."""
    case: str
    """A key of runs.CASES."""
    subject: str = ""
    """The layer the caught and named findings must be about ("" for any)."""
    note: str = ""
    crashes: bool = False
    """The bug crashes the script itself (as it does without gradscope)."""

    @property
    def expect(self) -> Expect:
        return CLASSES[self.bug]


def _rows() -> list[Row]:
    frozen = "frozen in optimizer"
    out = [
        Row("nanoGPT", "healthy", "nanogpt"),
        Row("makemore", "healthy", "makemore"),
        Row("minGPT sort", "healthy", "mingpt"),
        Row(
            "minGPT adder",
            "clip absorbs spikes (healthy)",
            "adder",
            note="stock 2-digit, clip 1.0, spikes at 223 and 226",
        ),
        Row("minGPT adder", "healthy", "adder-1digit", note="1-digit sums"),
        Row("GAT", "healthy", "gat"),
        Row("word_language_model", "healthy", "word-lm", note="manual update"),
        Row("word_language_model", "healthy", "word-lm-adamw", note="AdamW"),
        Row("vae", "healthy", "vae"),
        Row("MLP", "healthy", "mlp-adam", note="Adam"),
        Row("MLP", "healthy", "mlp-sgd", note="SGD momentum 0.9"),
        Row("nanoGPT", "lr too high", "nanogpt-lr100", note="100x, warm-up to 0.1"),
        Row("minGPT sort", "lr too high", "mingpt-lr100", note="100x"),
        Row("minGPT adder", "lr too high", "adder-lr100", note="100x, 1-digit"),
        Row("GAT", "lr too high", "gat-lr100", note="100x"),
        Row("vae", "lr too high", "vae-lr100", note="100x: NaN, BCE raises", crashes=True),
    ]
    for project, case in (
        ("nanoGPT", "nanogpt"),
        ("makemore", "makemore"),
        ("minGPT sort", "mingpt"),
        ("GAT", "gat"),
        ("vae", "vae"),
        ("word_language_model", "word-lm"),
        ("MLP", "mlp-adam"),
    ):
        note = {"vae": "BCE term only", "word-lm": "manual update"}.get(case, "")
        out.append(Row(project, "loss maximised", f"{case}-loss-negated", note=note))
    out += [
        Row("nanoGPT", "decay too strong", "nanogpt-decay100", note="AdamW wd 100"),
        Row("makemore", "decay too strong", "makemore-decay100", note="AdamW wd 100"),
        Row("minGPT adder", "decay too strong", "adder-decay100", note="wd 100, 1-digit"),
    ]
    for project, case in (
        ("nanoGPT", "nanogpt"),
        ("makemore", "makemore"),
        ("minGPT sort", "mingpt"),
        ("vae", "vae"),
    ):
        out.append(Row(project, frozen, f"{case}-frozen", subject=runs.FROZEN[case]))
    for project, case in (
        ("nanoGPT", "nanogpt"),
        ("makemore", "makemore"),
        ("minGPT sort", "mingpt"),
        ("vae", "vae"),
        ("MLP", "mlp-adam"),
    ):
        out.append(Row(project, "zero_grad before step", f"{case}-zero-grad-before-step"))
    out.append(Row("word_language_model", "no zero_grad, manual update", "word-lm-no-zero-grad"))
    for project, case, note in (
        ("nanoGPT", "nanogpt", "AdamW"),
        ("makemore", "makemore", "AdamW"),
        ("minGPT sort", "mingpt", "AdamW"),
        ("vae", "vae", "Adam"),
        ("MLP", "mlp-adam", "Adam"),
        ("MLP", "mlp-sgd", "SGD momentum 0.9"),
    ):
        out.append(Row(project, "no zero_grad", f"{case}-no-zero-grad", note=note))
    return out


ROWS = _rows()

LOWER_LR = re.compile(
    r"\b(lower|reduce|decrease)\b[^.;]{0,40}\blearning rate"
    r"|\blearning rate\b[^.;]{0,20}\btoo (high|large)",
    re.IGNORECASE,
)
"""Advice that blames the learning rate."""


def blames_lr(f: Finding) -> bool:
    return bool(LOWER_LR.search(f"{f.message} {f.advice}"))


@dataclass
class Verdict:
    """One row judged; None where a column does not apply."""

    row: Row
    status: str
    findings: list[Finding] = field(default_factory=list)
    caught: bool | None = None
    named: bool | None = None
    cause_first: bool | None = None
    right_step: bool | None = None
    first_step: int | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        cols = (self.caught, self.named, self.cause_first, self.right_step)
        return self.status == self.expected_status and all(c is not False for c in cols)

    @property
    def expected_status(self) -> str:
        return "crashed" if self.row.crashes else "completed"

    def problems(self) -> list[str]:
        names = ("caught", "named", "cause-first", "right step")
        cols = (self.caught, self.named, self.cause_first, self.right_step)
        out = [n for n, c in zip(names, cols, strict=True) if c is False]
        if self.status != self.expected_status:
            out.insert(0, f"run {self.status}")
        return out + [f"{f.rule} {f.severity} {f.subject}: {f.message}" for f in self.findings]


def _about(row: Row, f: Finding) -> bool:
    """The finding is about the row's subject: the layer itself or one of its parameters."""
    p = row.subject
    return not p or f.subject == p or f.subject.startswith(p + ".")


def judge(row: Row, report) -> Verdict:
    """The four columns for one row, from the report watch gave."""
    exp = row.expect
    found = list(report.findings)
    v = Verdict(row, report.run.status, found)
    if exp.rule is None:
        v.caught = not [f for f in found if f.severity >= Severity.WARNING]
        return v
    v.caught = any(f.severity >= exp.severity and _about(row, f) for f in found)
    named = [f for f in found if f.rule == exp.rule and _about(row, f)]
    v.named = bool(named)
    about = [f for f in found if _about(row, f)]
    lead_ok = bool(about) and about[0].rule == exp.rule
    serious = [f for f in found if f.severity >= Severity.WARNING]
    v.cause_first = lead_ok and (exp.lr_cause or not any(blames_lr(f) for f in serious))
    steps = sorted(s for f in named for s in f.steps)
    v.first_step = steps[0] if steps else None
    if exp.window is not None:
        lo, hi = exp.window
        v.right_step = v.first_step is not None and lo <= v.first_step <= hi
    return v


def run_row(row: Row) -> Verdict:
    start = time.perf_counter()
    report = runs.watched(row.case)
    v = judge(row, report)
    v.seconds = time.perf_counter() - start
    return v


def _mark(value: bool | None) -> str:
    return "-" if value is None else ("✓" if value else "✗")


def _rules(v: Verdict) -> str:
    if not v.findings:
        return "none"
    return " ".join(f"{f.rule}{str(f.severity)[0]}" for f in v.findings)


def table(verdicts: list[Verdict]) -> str:
    """The markdown table: one line per row."""
    head = (
        "| project | bug class | case | expected | caught | named | cause-first | right step "
        "| findings (worst first; e/w/i) |\n|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for v in verdicts:
        exp = v.row.expect
        expected = exp.rule or "no finding ≥ warning"
        step = _mark(v.right_step)
        if v.first_step is not None:
            step += f" ({v.first_step})"
        bug = v.row.bug + (f" ({v.row.note})" if v.row.note else "")
        status = "" if v.status == "completed" else f" run {v.status};"
        lines.append(
            f"| {v.row.project} | {bug} | `{v.row.case}` | {expected} | {_mark(v.caught)} "
            f"| {_mark(v.named)} | {_mark(v.cause_first)} | {step} |{status} {_rules(v)} |"
        )
    return head + "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    rows = [r for r in ROWS if not argv or r.case in argv]
    verdicts = []
    for row in rows:
        with contextlib.redirect_stdout(sys.stderr):  # the scripts' own prints
            verdicts.append(run_row(row))
        print(f"{row.case}: {verdicts[-1].seconds:.1f} s", file=sys.stderr)
    sys.stdout.write(table(verdicts))
    good = sum(v.ok for v in verdicts)
    total = sum(v.seconds for v in verdicts)
    sys.stdout.write(f"\n{good} of {len(verdicts)} rows right; {total:.0f} s of runs.\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
