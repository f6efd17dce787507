"""Comparing a run with a reference log, one step at a time (a file, or `watch --against`).

Steps pair by (optimizer, step number): runs of different lengths are compared over the
steps both logged, steps logged at different intervals over the ones they share.
Parameters pair by name as `gradscope diff` pairs them (gradscope/diff/align.py:
wrapper segments such as `module.` and `_orig_mod.`, a common leading prefix, then
--name-map). At every common step the loss, the total gradient norm and each paired
parameter's gradient norm are compared (gradscope/diff/runs/tolerance.py); the first
step where one differs beyond the tolerance is the divergence, and `feed` returns it
once, as it happens. No torch here.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

from gradscope.diff.align import EMPTY_MAP, NameMap, Pairing, pair_names
from gradscope.diff.runs import trained
from gradscope.diff.runs.log import RunLog, Step, interval
from gradscope.diff.runs.result import Divergence, Gap, Growth, Parting, RunsDiff, Series
from gradscope.diff.runs.tolerance import RunTolerance, relative

GROWTH_OFFSETS = (1, 10, 100, 1000)
"""Compared steps after the first divergence at which the gap is reported."""


@dataclass(frozen=True)
class _Pair:
    ref: str
    new: str
    i: int
    """Position in the reference's param_norms."""
    j: int
    """Position in the new run's."""
    series: list[float]
    """The reference name's relative differences, one per compared step."""


class RunsComparer:
    """Feed the new run's steps in order (`feed`); `finish` gives the RunsDiff."""

    def __init__(self, ref: RunLog, tolerance: RunTolerance, names: NameMap = EMPTY_MAP) -> None:
        self.ref = ref
        self.tol = tolerance
        self.names = names
        self._ref_steps = {(o, s.step): s for o, ss in ref.steps.items() for s in ss}
        self._new_names: tuple[str, ...] | None = None
        self._names_seen: Sequence[str] | None = None
        """The names object last given (a live run passes the same list, grown in place)."""
        self._names_count = 0
        self.pairing = Pairing({}, ("", ""), tuple(ref.names), ())
        self._pairs: list[_Pair] = []
        self._unpaired: list[list[float]] = []
        """Series of parameters paired earlier that the current names lack."""
        self.divergences: dict[int, Divergence] = {}
        self.parting: dict[str, Parting] = {}
        self.series = Series()
        self.gap: list[float] = []
        """Per compared step, the largest finite relative difference of anything compared."""
        self.new_steps: dict[int, list[Step]] = {}
        """The new run's steps, without their per-parameter norms (for `trained`)."""
        self.common: dict[int, int] = {}
        self.lr_differs: tuple[int, int, tuple[float, ...], tuple[float, ...]] | None = None
        self._started = time.perf_counter()

    def _pair(self, names: Sequence[str]) -> None:
        if names is self._names_seen and len(names) == self._names_count:
            return
        self._names_seen, self._names_count = names, len(names)
        if self._new_names is not None and tuple(names) == self._new_names:
            return
        self._new_names = tuple(names)
        self.pairing = pair_names(self.ref.names, list(names), self.names)
        ref_at = {n: i for i, n in enumerate(self.ref.names)}
        new_at = {n: j for j, n in enumerate(names)}
        params = self.series.params
        for r in self.pairing.pairs:
            params.setdefault(r, [math.nan] * len(self.series.steps))
        self._pairs = [
            _Pair(r, n, ref_at[r], new_at[n], params[r])
            for r, (n, _how) in self.pairing.pairs.items()
        ]
        self._unpaired = [v for r, v in params.items() if r not in self.pairing.pairs]

    def feed(self, step: Step, names: Sequence[str]) -> Divergence | None:
        """Compare one step of the new run (`names`: its parameter names, as its log's
        header gives them). Returns the first divergence of any optimizer, once."""
        self._pair(names)
        light = Step(
            step.step, step.optimizer, step.loss, step.grad_norm, step.lrs, (), step.update_norm
        )
        self.new_steps.setdefault(step.optimizer, []).append(light)
        ref = self._ref_steps.get((step.optimizer, step.step))
        if ref is None:
            return None
        self.common[step.optimizer] = self.common.get(step.optimizer, 0) + 1
        if self.lr_differs is None and ref.lrs != step.lrs:
            self.lr_differs = (step.optimizer, step.step, ref.lrs, step.lrs)
        beyond = self._compare(ref, step)
        if not beyond or step.optimizer in self.divergences:
            return None
        beyond.sort(key=lambda g: -g.ratio)
        div = Divergence(step.optimizer, step.step, tuple(beyond))
        self.divergences[step.optimizer] = div
        return div if len(self.divergences) == 1 else None

    def _compare(self, ref: Step, new: Step) -> list[Gap]:
        """Record every relative difference of this step; return the gaps beyond tolerance.
        (The hot loop of a long run: a Gap is made only for a value beyond tolerance.)"""
        tol, series = self.tol, self.series
        series.steps.append(new.step)
        series.optimizers.append(new.optimizer)
        beyond, worst = [], 0.0
        for what, a, b, values in (
            ("loss", ref.loss, new.loss, series.loss),
            ("grad_norm", ref.grad_norm, new.grad_norm, series.grad_norm),
        ):
            rel, ratio = relative(a, b), tol.ratio(a, b)
            values.append(rel)
            worst = rel if worst < rel < math.inf else worst
            if ratio > 1:
                beyond.append(Gap(what, what, a, b, rel, ratio))
        rn, nn = ref.param_norms, new.param_norms
        for p in self._pairs:
            a = rn[p.i] if p.i < len(rn) else None
            b = nn[p.j] if p.j < len(nn) else None
            if a == b:
                p.series.append(0.0 if a is not None else math.nan)
                continue
            rel = relative(a, b)
            p.series.append(rel)
            worst = rel if worst < rel < math.inf else worst
            ratio = tol.ratio(a, b)
            if ratio > 1:
                gap = Gap(p.ref, p.new, a, b, rel, ratio)
                beyond.append(gap)
                if p.ref not in self.parting:
                    self.parting[p.ref] = Parting(p.ref, p.new, new.step, gap)
        for values in self._unpaired:
            values.append(math.nan)
        self.gap.append(worst)
        return beyond

    def finish(self, new_label: str, notes: Sequence[str] = ()) -> RunsDiff:
        """The result over everything fed; the findings are added by gradscope.diff.runs."""
        ref, new = self.ref.steps, self.new_steps
        several = {"ref": len(ref) > 1, "new": len(new) > 1}
        training = [trained.judge("ref", o, ss, several["ref"]) for o, ss in sorted(ref.items())]
        training += [trained.judge("new", o, ss, several["new"]) for o, ss in sorted(new.items())]
        result = RunsDiff(
            ref_label=self.ref.label,
            new_label=new_label,
            tolerance=self.tol,
            lengths={
                "ref": {o: len(ss) for o, ss in sorted(ref.items())},
                "new": {o: len(ss) for o, ss in sorted(new.items())},
            },
            last_steps={
                "ref": self.ref.last_step(),
                "new": max((ss[-1].step for ss in new.values() if ss), default=0),
            },
            common=dict(sorted(self.common.items())),
            intervals={
                "ref": {o: interval(ss) for o, ss in sorted(ref.items())},
                "new": {o: interval(ss) for o, ss in sorted(new.items())},
            },
            pairs=[(r, n, how) for r, (n, how) in self.pairing.pairs.items()],
            ref_only=list(self.pairing.ref_only),
            new_only=list(self.pairing.new_only),
            prefixes=self.pairing.prefixes,
            divergences=sorted(self.divergences.values(), key=lambda d: (d.step, d.optimizer)),
            parting=sorted(self.parting.values(), key=lambda p: (p.step, -p.gap.ratio)),
            growth=self._growth(),
            training=training,
            lr_differs=self.lr_differs,
            series=self.series,
            notes=list(notes),
        )
        if not self.common:
            result.could_not_run = (
                "no step is in both logs: nothing to compare "
                f"(steps {_span(ref)} against {_span(new)})"
            )
        result.duration_s = time.perf_counter() - self._started
        return result

    def _growth(self) -> list[Growth]:
        """The gap after the first divergence, at GROWTH_OFFSETS compared steps of its
        optimizer and at the last one, as a factor of the first nonzero finite gap."""
        first = min(self.divergences.values(), key=lambda d: d.step, default=None)
        if first is None:
            return []
        at = [
            k
            for k, (s, o) in enumerate(zip(self.series.steps, self.series.optimizers, strict=True))
            if o == first.optimizer and s >= first.step
        ]
        base = next((self.gap[k] for k in at if self.gap[k] > 0), None)
        wanted = [0, *(d for d in GROWTH_OFFSETS if d < len(at) - 1), len(at) - 1]
        out: list[Growth] = []
        for d in dict.fromkeys(wanted):
            k = at[d]
            rel = self.gap[k]
            out.append(Growth(self.series.steps[k], rel, rel / base if base else None))
        return out


def _span(steps: dict[int, list[Step]]) -> str:
    every = [s.step for ss in steps.values() for s in ss]
    return f"{min(every)}-{max(every)}" if every else "none"
