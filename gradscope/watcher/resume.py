"""A watch that continues an earlier one (a host's checkpoint resumed): the earlier
steps' records are the run's first, and its steps are numbered on from theirs. No torch."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

from gradscope.steps.records import StepRecord

TUPLES = ("lrs", "param_norms", "update_ratios", "micro_param_sq")
"""The fields a checkpoint's JSON or pickle may give back as lists."""


@dataclass(frozen=True)
class Resume:
    """The earlier run's records, in order, and the steps it had numbered."""

    records: tuple[StepRecord, ...]
    steps: int

    def state(self) -> dict[str, Any]:
        """Plain values only (dicts, lists, floats, None): a checkpoint loaded with
        torch.load(weights_only=True) or written as JSON keeps them."""
        return {"steps": self.steps, "records": [_plain(r) for r in self.records]}

    @classmethod
    def of(cls, state: dict[str, Any]) -> Resume:
        records = tuple(_record(d) for d in state.get("records", ()))
        return cls(records, int(state.get("steps", len(records))))


def _plain(r: StepRecord) -> dict[str, Any]:
    out = asdict(r)
    for name in TUPLES:
        if out[name] is not None:
            out[name] = [_number(v) for v in out[name]]
    return {k: _number(v) for k, v in out.items()}


def _number(v: Any) -> Any:
    """NaN and infinities as strings: JSON has none, and a checkpoint may be JSON."""
    if isinstance(v, float) and not math.isfinite(v):
        return repr(v)
    return v


def _value(v: Any) -> Any:
    return float(v) if v in ("nan", "inf", "-inf") else v


NAMES = frozenset(f.name for f in fields(StepRecord))


def _record(d: dict[str, Any]) -> StepRecord:
    values = {k: _value(v) for k, v in d.items() if k in NAMES}
    for name in TUPLES:
        if values.get(name) is not None:
            values[name] = tuple(_value(v) for v in values[name])
    return StepRecord(**values)


def apply(resume: Resume | None, state: Any, recorder: Any) -> None:
    """Start the watch where the earlier one ended: its records stored, its step count
    taken (the next step is `resume.steps + 1`)."""
    if resume is None:
        return
    state.steps = resume.steps
    recorder.records.extend(resume.records, restored=True)
    widths = [len(r.param_norms) for r in resume.records]
    recorder.width = max([recorder.width, *widths])
