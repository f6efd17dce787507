"""The shape every terminal report shares: header, fields, finding blocks, verdict.

    gradscope inspect · example detached-middle
      model     DetachedMiddle on cpu, 5,861 parameters in 8 tensors (0 frozen),
                torch 2.13.0
    ...
    Findings (4)
      ERROR   GS101 none-grad
              4 subjects: encoder.0.weight, encoder.0.bias, encoder.2.weight,
                encoder.2.bias
              advice: find the .detach(), .data, torch.no_grad() or non-torch
                round-trip between the module and the loss
    ...
    verdict: ERROR  (4 errors, 0 warnings, 0 info)

Every paragraph is wrapped here, at word boundaries, with the lines it wraps onto
indented under its first (`paragraph`), so no report has a continuation line at column 0
or a line wider than the console. All text goes through `styled`: never markup.
"""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from gradscope.findings import Finding, subjects_text
from gradscope.report.text import Part, styled

FIELD = 12
"""Where a header field's value starts: `  model     DetachedMiddle ...`."""
DETAIL = 10
"""Where a finding's details start: under the rule id of `  ERROR   GS101 ...`."""
HANG = 2
"""How much further than its first line a wrapped paragraph's other lines start."""
NARROWEST = 16
"""A paragraph's text is never wrapped narrower than this, whatever its indent."""
MAX_SUBJECTS = 6
"""Subjects named in a block of findings that share evidence; the rest are counted."""
LISTED = 8
"""Findings listed one by one in a block of a run's findings; the rest are counted."""
STYLE = {
    # a finding's severity (a verdict that names the worst prints it in capitals)
    "error": "bold red",
    "warning": "yellow",
    "info": "cyan",
    # verdicts and a target's state: passed, failed, not judged
    "OK": "bold green",
    "PASS": "bold green",
    "IDENTICAL": "bold green",
    "FAIL": "bold red",
    "DIFFER": "bold red",
    "COULD NOT RUN": "bold magenta",
    "NOT COMPARED": "bold magenta",
    "NOT JUDGED": "bold magenta",
    # a parameter's status in the inspect table
    "ok": "green",
    "frozen": "dim",
    "none": "bold red",
    "non-finite": "bold red",
    "exploding": "red",
    "vanishing": "yellow",
    "zero": "yellow",
    # whether each run of a diff of two runs trained
    "yes": "bold green",
    "NO": "bold red",
    "?": "bold yellow",
}
"""The one table of the colour each word of a severity, verdict or status is drawn in."""


def style_of(word: str, default: str = "") -> str:
    """The word's style as printed; a severity in capitals (a verdict's ERROR) as its own."""
    return STYLE.get(word) or STYLE.get(word.lower(), default)


def paragraph(console: Console, text: Text, indent: int = 0, hang: int = HANG) -> None:
    """Print `text` from column `indent`, every line it wraps onto (or a newline in it
    starts) from `indent + hang`; words are kept whole unless one is wider than a line."""
    first_width = max(console.width - indent, NARROWEST)
    rest_width = max(console.width - indent - hang, NARROWEST)
    lines: list[Text] = []
    for i, part in enumerate(text.split("\n", allow_blank=True)):
        part.expand_tabs(8)
        if i == 0:
            head = part.wrap(console, first_width, overflow="fold", justify="default")
            if len(head) <= 1:
                lines += head
                continue
            lines.append(head[0])
            part = _after(part, len(head[0].plain))
        lines += part.wrap(console, rest_width, overflow="fold", justify="default")
    for n, line in enumerate(lines):
        line.rstrip()
        lead = " " * (indent if n == 0 else indent + hang)
        console.print(Text(lead) + line, soft_wrap=True)


def _after(text: Text, start: int) -> Text:
    """`text` from `start` on, without the spaces the line break fell on."""
    plain = text.plain
    while start < len(plain) and plain[start] == " ":
        start += 1
    return text[start:]


def line(console: Console, *parts: Part, indent: int = 0, hang: int = HANG) -> None:
    """One paragraph of styled parts (see `styled`): the common case of `paragraph`."""
    paragraph(console, styled(*parts), indent, hang)


def header(console: Console, command: str, label: str) -> None:
    """`gradscope <command> · <label>`, the first line of every report."""
    line(console, (f"gradscope {command}", "bold"), " · ", label, hang=4)


def field(console: Console, name: str, *value: Part) -> None:
    """`  name      value`, the value's wrapped lines under its start."""
    lead = f"  {name}".ljust(FIELD - 1) + " "
    paragraph(console, styled(lead, *value), 0, FIELD)


def finding_head(console: Console, label: str, style: str, *title: Part) -> None:
    """`  ERROR   GS101 none-grad`, `  FAIL    sign-flip  backward · x → out`: a label in
    a 7-column slot, then the title, whose wrapped lines start under it (at DETAIL)."""
    paragraph(console, styled((f"  {label:<7} ", style), *title), 0, DETAIL)


def severity_head(console: Console, severity: str, rule: str, slug: str) -> None:
    """The head of a finding block: severity, rule id and slug."""
    style = style_of(severity)
    finding_head(console, severity.upper(), style, (rule, "bold"), " ", (slug, "dim"))


def detail(console: Console, label: str, *text: Part, style: str = "") -> None:
    """A paragraph of a finding block at column DETAIL: `advice: ...`, label in bold."""
    lead: list[Part] = [(label + " ", f"bold {style}".strip())] if label else []
    paragraph(console, styled(*lead, *text, style=style), DETAIL)


def note(console: Console, *text: Part, indent: int = 2) -> None:
    """A dim remark under a block (rows left out, findings ignored)."""
    paragraph(console, styled(*text, style="dim"), indent)


def counts(by_severity: dict[str, int]) -> str:
    """ "1 error, 2 warnings, 0 info": what a verdict counts, in every report."""
    errors, warnings = by_severity["error"], by_severity["warning"]
    return (
        f"{errors} error{'' if errors == 1 else 's'}, "
        f"{warnings} warning{'' if warnings == 1 else 's'}, {by_severity['info']} info"
    )


def verdict(console: Console, word: str, style: str, *why: Part) -> None:
    """`verdict: WORD  (why)`, the last line of every report."""
    more: list[Part] = ["  (", *why, ")"] if why else []
    line(console, ("verdict: ", "bold"), (word, style), *more, hang=9)


def findings_title(console: Console, count: int, empty: str = "No findings.") -> None:
    """`Findings (3)`, or `empty` in green when there are none."""
    console.print()
    if count:
        line(console, ("Findings", "bold"), f" ({count})")
    else:
        line(console, (empty, "green"))


def finding_block(console: Console, group: list[Finding], each: bool = False) -> None:
    """One rule's findings as one block: head, what was seen, evidence, advice. The rule's
    generic table row stays in `gradscope rules GSxxx` and the JSON: under a finding it
    repeats the finding, sometimes wrongly for it. Findings that share evidence and advice
    (`findings.grouped`) name their subjects once; with `each`, every finding's own message
    and evidence is listed (at most LISTED of them), as a run's findings of one rule differ
    step by step."""
    first = group[0]
    severity_head(console, str(first.severity), first.rule, first.slug)
    if each:
        for f in group[:LISTED]:
            told = f.message.startswith(f.subject)
            detail(console, "", f.message if told else f"{f.subject}: {f.message}")
            for e in f.evidence:
                detail(console, "evidence:", e, style="dim")
        if len(group) > LISTED:
            detail(console, "", f"… {len(group) - LISTED} more of {first.rule}", style="dim")
    else:
        if len(group) == 1:
            detail(console, "", first.message)
        else:
            detail(console, f"{len(group)} subjects:", subjects_text(group, MAX_SUBJECTS))
            detail(console, "e.g.", first.message, style="dim")
        for e in first.evidence:
            detail(console, "evidence:", e)
    detail(console, "advice:", first.advice)


def status_line(console: Console, state: str, style: str, slot: int, *title: Part) -> None:
    """`PASS  title` for one target of several (check, gradcheck): the state in a slot
    `slot` wide, the title's wrapped lines under its start."""
    paragraph(console, styled((state.ljust(slot) + " ", style), *title), 0, slot + 1)
