"""Findings as the run goes: the run read back so far judged now and then, and only the
findings a later step cannot take back said. No torch.

Which: the errors about a mechanism (a NaN step, a parameter in no optimizer, gradients
never reset, ...) and the precursors (GS451-GS454), whose evidence is the steps already
seen. Never a verdict over the whole run (no progress, a trend, a layer that stopped
learning): judged at the end only, in the report.

When: at a read-back with new steps, at most one judgement per `BUDGET` of the time since
the last (a judgement that took 4 ms waits 160 ms): the hosts' steps stay within a few
percent of their cost, whatever the run's length or the judge's.
"""

from __future__ import annotations

import time
from typing import Any

from gradscope.findings import Finding, Severity
from gradscope.rules.watch import judge

LIVE_RULES = frozenset(
    {
        "GS401",  # non-finite step
        "GS408",  # AMP's loss scale collapsed
        "GS411",  # a parameter in no optimizer
        "GS412",  # gradients never reset
        "GS416",  # clipped before unscale
        "GS422",  # zero_grad between backward and step
        "GS431",  # probabilities fed as logits
        "GS432",  # a loss fed probabilities
        "GS433",  # where the first NaN came from
        "GS434",  # NaN weights
        "GS435",  # gradients wiped within a step
        "GS437",  # the optimizer holds stale parameters
        "GS451",  # precursors: Adam's v lagging
        "GS452",  # a learning rate that jumped
        "GS453",  # attention logits growing
        "GS454",  # output logits drifting
    }
)
"""The rules whose findings are said as they happen (at warning and error: an info one,
such as GS411's "nothing updates it", is a verdict over the whole run)."""

BUDGET = 0.025
"""The judge's share of the run's time, at most (between two judgements)."""


class Live:
    """Judges a watcher's run so far; each finding said once (by rule and subject)."""

    def __init__(self, settings: Any, budget: float | None = None) -> None:
        self.settings = settings
        self.budget = BUDGET if budget is None else budget
        self.said: set[tuple[str, str]] = set()
        self.seen = 0
        """Steps read back at the last judgement."""
        self.ready_at = 0.0
        self.judgements = 0
        self.spent_s = 0.0

    def poll(self, watcher: Any, force: bool = False) -> list[Finding]:
        """New live findings, if new steps were read back and the budget allows."""
        count = len(watcher.recorder.records)
        now = time.perf_counter()
        if count == self.seen or (now < self.ready_at and not force):
            return []
        findings = judge(watcher.so_far(), self.settings)
        spent = time.perf_counter() - now
        self.seen, self.judgements, self.spent_s = count, self.judgements + 1, self.spent_s + spent
        self.ready_at = now + spent / self.budget
        return self.new(findings)

    def new(self, findings: list[Finding]) -> list[Finding]:
        out = []
        for f in findings:
            key = (f.rule, f.subject)
            if f.rule in LIVE_RULES and f.severity >= Severity.WARNING and key not in self.said:
                if f.ignored_by is not None:
                    continue
                self.said.add(key)
                out.append(f)
        return out


def stops(findings: list[Finding]) -> bool:
    """An error among them (the opt-in stop's cause)."""
    return any(f.severity is Severity.ERROR for f in findings)


def line(f: Finding) -> str:
    """A finding as one log line."""
    at = f" at step {f.steps[0]}" if f.steps else ""
    return f"gradscope {f.rule} {f.severity}{at}: {f.subject}: {f.message}"
