"""GS442: Adam's eps above √v̂ for most of the elements it moves, from the optimizer's own
state at sampled steps (watcher/adam_eps.py). No torch."""

from __future__ import annotations

import itertools
from dataclasses import replace

from gradscope.config import Thresholds
from gradscope.findings import RULES, Finding, Severity
from gradscope.fmt import num
from gradscope.rules import eps_outgrown, tiny_loss_value
from gradscope.rules.adam_measured import adam_measured
from gradscope.rules.registry import Stage, rule
from gradscope.rules.step_common import about
from gradscope.steps.records import WatchRun
from gradscope.steps.state_facts import EpsSample

MOST = 0.5
"""Most of the elements: more than half."""
SHOWN = 3


@rule(
    "GS442",
    "adam-eps-dominates",
    Severity.WARNING,
    "adam-eps",
    Stage.WATCH,
    "watch: Adam's eps is above √v̂ for most of the elements it moves, so its step is "
    "lr·m̂/eps: SGD with a tiny learning rate, not an adaptive step",
    example="torch.optim.Adam(model.parameters(), lr=1e-3, eps=0.1) on gradients of order "
    "1e-3, or the default eps=1e-8 on a loss multiplied by 1e-9",
    fix="an eps well below the gradients' size (the default 1e-8; 1e-6 to 1e-4 under "
    "float16), or the loss at its natural scale",
    objectives="any: Adam's eps against its √v̂, a mechanism independent of what the loss means",
    explains=("GS405", "GS410", "GS415"),
)
def adam_eps_dominates(run: WatchRun, t: Thresholds) -> list[Finding]:
    """Adam divides the momentum by √v̂ + eps. Read from the optimizer's state after the
    step (steps 1-3, then every 25th): where 0 < v and √v̂ < eps, eps decides the step
    size, and the update is lr·m̂/eps, a plain SGD step at lr/eps. Fires when that holds
    for more than half of the optimizer's elements with v > 0 at two samples in a row
    (steps 1 and 2 at the earliest). Elements whose v is 0 never had a gradient and move
    neither way; a large eps on purpose (1e-3 on gradients of 1) stays silent, since
    √v̂ is larger still. An optimizer whose class is not known to step Adam's rule is
    judged only where its update measured at its first steps is Adam's (adam_measured).
    Information where the gradients grew past eps: at the last two samples, or, after the
    last sample, in the gradient norm's RMS per element at the run's last steps
    (eps_outgrown.py: DreamerV3's actor at eps 1e-5 while its first rewards are learned)."""
    out = []
    by_optimizer: dict[int, dict[int, list[EpsSample]]] = {}
    for sample in run.state_facts.eps:
        by_optimizer.setdefault(sample.optimizer, {}).setdefault(sample.step, []).append(sample)
    for index, steps in by_optimizer.items():
        taken = [x for samples in steps.values() for x in samples]
        if not all(x.known for x in taken) and not adam_measured(run, index, taken):
            continue  # a class not known to step Adam's rule, whose update is not Adam's
        order = sorted(steps)
        hits = [s for s in order if _share(steps[s]) > MOST]
        pair = next((s for a, s in itertools.pairwise(order) if a in hits and s in hits), None)
        if pair is None:
            continue
        first = order[order.index(pair) - 1]
        finding = _finding(run, index, steps[pair], first, pair)
        last = [(s, _share(steps[s])) for s in order if s > pair + 1][-2:]
        if len(last) == 2 and all(share <= MOST for _, share in last):
            finding = _passed(finding, last)
        elif grown := eps_outgrown.grown_past(run, index, finding_eps(steps[pair]), order[-1]):
            finding = _grown(finding, *grown)
        out.append(about(finding, [first, pair]))
    return out


def _passed(finding: Finding, last: list[tuple[int, float]]) -> Finding:
    """Information: eps held the first steps; at the last two samples the gradients had
    grown past it for most elements, so Adam's step is its own there (an LSTM's tiny
    gradients at its initialisation under an RL agent's eps of 1e-3)."""
    (a, x), (b, y) = last
    return replace(
        finding,
        severity=Severity.INFO,
        message=f"{finding.message}; at the start only: by steps {a} and {b} it was above "
        f"√v̂ for {x:.0%} and {y:.0%} of them (the gradients grew past it)",
        advice="nothing to fix if the eps is meant (an RL agent's 1e-3 damps its first "
        "steps); a lower eps gives those first steps Adam's own size",
    )


def _grown(finding: Finding, step: int, rms: float) -> Finding:
    """Information: eps held every sample, but by the run's last steps, after them, the
    gradient's RMS per element had grown above it (rules/eps_outgrown.py)."""
    return replace(
        finding,
        severity=Severity.INFO,
        message=f"{finding.message}; at the sampled steps only: by step {step} the gradient's "
        f"RMS per element was {num(rms)}, above eps (the gradients grew past it)",
        advice="nothing to fix if the eps is meant (DreamerV3's actor and critic at 1e-5, an "
        "RL agent's 1e-3: tiny first gradients are not scaled up); a lower eps gives those "
        "first steps Adam's own size",
    )


def finding_eps(samples: list[EpsSample]) -> float:
    return max(s.eps for s in samples)


def _share(samples: list[EpsSample]) -> float:
    under = sum(s.dominated()[0] for s in samples)
    live = sum(s.dominated()[1] for s in samples)
    return under / live if live else 0.0


def _finding(run: WatchRun, index: int, samples: list[EpsSample], first: int, step: int) -> Finding:
    eps = finding_eps(samples)
    share = _share(samples)
    tensors = sorted(
        ((p, sh) for s in samples for p, sh, _ in s.shares if sh > MOST), key=lambda x: -x[1]
    )
    names = [
        f"{run.params[p].name} {sh:.0%}" if p < len(run.params) else f"#{p} {sh:.0%}"
        for p, sh in tensors[:SHOWN]
    ]
    more = f" and {len(tensors) - SHOWN} more" if len(tensors) > SHOWN else ""
    label = run.optimizer_label(index)
    message = (
        f"eps = {num(eps)} is above √v̂ for {share:.0%} of the elements {label} moves "
        f"(steps {first} and {step}): there its step is lr·m̂/eps, SGD at a learning rate "
        f"of lr/eps, not Adam's adaptive step"
    )
    tiny = tiny_loss_value.computed_tiny(run, index, step) if eps <= 1e-7 else None
    if tiny is not None:
        advice = tiny
    elif eps <= 1e-7:
        advice = (
            "the gradients themselves are tiny (√v̂ below 1e-8): keep the loss at its "
            "natural scale (a loss multiplied far down makes every gradient fall under eps)"
        )
    else:
        advice = (
            f"lower eps (the default 1e-8; 1e-6 to 1e-4 under float16): at {num(eps)} it "
            "outweighs the gradients' own size"
        )
    evidence = (f"tensors where eps dominates: {', '.join(names)}{more}",)
    return RULES["GS442"].finding(
        label, message, advice, value=share, threshold=MOST, evidence=evidence
    )
