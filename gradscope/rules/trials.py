"""Many trainings in one script, one after another: a hyperparameter search, k-fold
cross-validation, random restarts, an ensemble trained member after member. Each trial's
optimizer steps tensors of its own (a model built for it) over a span of steps no other
optimizer steps in. A finding whose steps lie in one trial's span is about that trial and
says which; so is one about no step in particular (a trend, an update ratio, a layer's
gradient fallen to 0) whose subject is that trial's optimizer or tensors. Where the
script cut that trial short (it ran fewer steps than another trial, and trainings of
other tensors went on after it: pruned, stopped early, eliminated by successive
halving), the script has already acted on what the finding saw: a search tries
high learning rates on purpose and drops the trials that blow up. Such a finding stays, at
info, so that one abandoned trial does not fail the run. No torch."""

from __future__ import annotations

from dataclasses import dataclass, replace

from gradscope.findings import Finding, Severity
from gradscope.steps.records import WatchRun

MIN_TRIALS = 3
"""Optimizers over disjoint tensors, one after another, that make a run of trials: two are
as often a pretraining and a fine-tuning of different parts."""


@dataclass(frozen=True)
class Trial:
    """One optimizer's training, alone in its span of steps."""

    optimizer: int
    first: int
    last: int
    steps: int
    of: int
    """Optimizers that stepped in the run."""
    most: int
    """The most steps another trial ran: a meta-learning loop's inner optimizers, each a
    task's few steps, are cut short by none of them."""
    cut_short: bool
    """It ran fewer steps than `most`, and other trials stepped after it."""


def trials(run: WatchRun) -> list[Trial]:
    """The optimizers that each stepped tensors no other optimizer holds, with no other
    optimizer stepping between their first and last step; [] unless there are MIN_TRIALS."""
    steps = {k: [r.step for r in run.store.of_optimizer(k)] for k in range(len(run.members))}
    spans = {k: (s[0], s[-1], len(s)) for k, s in steps.items() if s and not _idle(run, k, s)}
    found = [k for k in spans if _alone(run, k, spans, steps)]
    if len(found) < MIN_TRIALS:
        return []
    end = max(last for _, last, _ in spans.values())
    out = []
    for k in found:
        first, last, count = spans[k]
        most = max(spans[j][2] for j in found if j != k)
        out.append(Trial(k, first, last, count, len(spans), most, count < most and last < end))
    return out


def _idle(run: WatchRun, k: int, steps: list[int]) -> bool:
    """Optimizer k stepped once and no tensor of its got a gradient: its step did nothing,
    no training (a value a parameter store replaces at every step, handed to a new optimizer
    each time by a per-parameter wrapper: rules/built_for_one_step.py)."""
    return len(steps) == 1 and not any(run.tensors.ever_had_grad(i) for i in run.members_of(k))


def _alone(
    run: WatchRun, k: int, spans: dict[int, tuple[int, int, int]], steps: dict[int, list[int]]
) -> bool:
    """Optimizer k's tensors are its own and no other optimizer stepped inside its span."""
    mine = set(run.members_of(k))
    if not mine:
        return False
    first, last, _ = spans[k]
    for j in spans:
        if j == k:
            continue
        if mine & set(run.members_of(j)) or any(first <= s <= last for s in steps[j]):
            return False
    return True


def attribute(run: WatchRun, findings: list[Finding]) -> list[Finding]:
    """Each finding whose steps all lie in one trial's span, or, about no step in
    particular, whose subject is that trial's optimizer or tensors, says which trial; one
    about a trial the script cut short is kept at info."""
    found = trials(run)
    if not found:
        return findings
    return [_about_trial(f, _trial_of(run, f, found)) for f in findings]


def _trial_of(run: WatchRun, finding: Finding, found: list[Trial]) -> Trial | None:
    if finding.steps:
        return next((t for t in found if all(t.first <= s <= t.last for s in finding.steps)), None)
    named = [t for t in found if run.optimizer_label(t.optimizer) in finding.subject]
    if len(named) == 1:
        return named[0]
    return _holding(run, finding.subject.split(" (")[0], found)


def _holding(run: WatchRun, name: str, found: list[Trial]) -> Trial | None:
    """The one trial whose optimizer holds every parameter `name` names: the parameter
    itself, or each under the module of that name (a trial's update ratios, a layer's
    gradient fallen to 0, told per tensor or layer and not per step)."""
    held = {i for i, p in enumerate(run.params) if p.name == name or p.name.startswith(name + ".")}
    owners = [t for t in found if held and held <= set(run.members_of(t.optimizer))]
    return owners[0] if len(owners) == 1 else None


def _about_trial(finding: Finding, trial: Trial | None) -> Finding:
    if trial is None:
        return finding
    said = (
        f"one of {trial.of} trainings run one after another (optimizer {trial.optimizer}, "
        f"steps {trial.first}-{trial.last}): "
    )
    if not trial.cut_short or finding.severity is Severity.INFO:
        return replace(finding, message=said + finding.message)
    cut = (
        f"; the script stopped this training after {trial.steps} step(s), where another ran "
        f"{trial.most}, and trained other tensors after it: a trial cut short (pruned, "
        f"stopped early, eliminated), kept at info (it was {finding.severity})"
    )
    return replace(finding, severity=Severity.INFO, message=said + finding.message + cut)
