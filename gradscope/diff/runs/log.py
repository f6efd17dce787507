"""Reading a `gradscope watch --log` file (JSON lines) into plain steps, robustly.

The format (docs/json-schema.md): a `{"params": [...]}` line (repeated, longer, when new
parameters appear), then one object per optimizer step, and a last `{"findings": [...]}`
line where the run was judged (read past: the diff compares steps). What a crash or a hand edit
leaves is read as far as it goes: a last line cut short mid-write is left out with a
note, a line that is not JSON elsewhere is skipped and counted. `.gz` files are read
through gzip. No torch here.
"""

from __future__ import annotations

import gzip
import itertools
import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gradscope.errors import ConfigError

_SPECIAL = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


@dataclass(frozen=True)
class Step:
    """What the diff needs of one optimizer step."""

    step: int
    optimizer: int
    loss: float | None
    grad_norm: float | None
    lrs: tuple[float, ...]
    param_norms: tuple[float | None, ...]
    """Per parameter (in the order of the log's `params`), its gradient norm; None: no grad."""
    update_norm: float | None = None
    """‖Δw‖ of the step, on sampled steps only (every watch --update-every)."""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Step:
        """A log line's object (or `StepRecord.to_dict()`); "nan"/"inf" strings are floats."""
        norms = d.get("param_norms") or ()
        return cls(
            int(d["step"]),
            int(d.get("optimizer") or 0),
            _number(d.get("loss")),
            _number(d.get("grad_norm")),
            tuple(x for x in (_number(v) for v in d.get("lrs") or ()) if x is not None),
            tuple([v if type(v) is float else _number(v) for v in norms]),
            _number(d.get("update_norm")),
        )

    @classmethod
    def from_record(cls, r: Any) -> Step:
        """A live `StepRecord` (gradscope/steps/records.py), as `watch --against` gets them."""
        return cls(
            r.step,
            r.optimizer,
            r.loss,
            r.grad_norm,
            tuple(r.lrs),
            tuple(r.param_norms),
            r.update_norm,
        )


def _number(v: Any) -> float | None:
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, str):
        return _SPECIAL.get(v.strip().lower())
    if isinstance(v, int | float):
        return float(v)
    return None


def interval(steps: Sequence[Step]) -> int:
    """Steps between logged lines of one optimizer (1: every step; 10: one in ten logged)."""
    gaps = {b.step - a.step for a, b in itertools.pairwise(steps)}
    return math.gcd(*gaps) if gaps else 1


@dataclass
class RunLog:
    """One run's log: its parameter names, steps by optimizer, and what was left out."""

    label: str
    names: list[str] = field(default_factory=list)
    steps: dict[int, list[Step]] = field(default_factory=dict)
    """Per optimizer index, its steps in step order (a repeated step number: the last wins)."""
    dtype: str | None = None
    """The dtype the log records (a header's "dtype"), if any; None: not recorded."""
    notes: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return sum(len(s) for s in self.steps.values())

    def last_step(self) -> int:
        return max((s[-1].step for s in self.steps.values() if s), default=0)

    def add(self, step: Step) -> None:
        series = self.steps.setdefault(step.optimizer, [])
        if series and series[-1].step >= step.step:  # a restart or a repeat: keep the newest
            while series and series[-1].step >= step.step:
                series.pop()
        series.append(step)

    def set_names(self, names: Iterable[str]) -> None:
        self.names = [str(n) for n in names]


def read(path: str) -> RunLog:
    """The log at `path`; ConfigError (exit 2) when it cannot be read or holds no step."""
    log = RunLog(path)
    try:
        lines = list(_lines(path))
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror or exc}") from None
    except (EOFError, gzip.BadGzipFile) as exc:
        raise ConfigError(f"{path}: not a readable gzip file ({exc})") from None
    bad: list[int] = []
    for number, (line, whole) in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            if number == len(lines) and not whole:
                log.notes.append(
                    f"{os.path.basename(path)}: its last line is cut short (a crash mid-write): "
                    "left out"
                )
            else:
                bad.append(number)
            continue
        _take(log, obj, number, bad)
    if bad:
        where = ", ".join(map(str, bad[:5])) + (" ..." if len(bad) > 5 else "")
        log.notes.append(
            f"{os.path.basename(path)}: {len(bad)} unreadable line(s) skipped ({where})"
        )
    if not log.count:
        raise ConfigError(
            f"{path}: no step found; expected a `gradscope watch --log` file "
            '(a {"params": [...]} line, then one JSON object per step)'
        )
    return log


def _take(log: RunLog, obj: Any, number: int, bad: list[int]) -> None:
    if not isinstance(obj, dict):
        bad.append(number)
    elif "params" in obj and "step" not in obj:
        if isinstance(obj["params"], list):
            log.set_names(obj["params"])
        dtype = obj.get("dtype")
        if isinstance(dtype, str):
            log.dtype = dtype.removeprefix("torch.")
    elif "step" in obj:
        try:
            log.add(Step.from_dict(obj))
        except (TypeError, ValueError, KeyError):
            bad.append(number)
    elif isinstance(obj.get("findings"), list):  # the run's findings, its last line
        pass
    else:
        bad.append(number)


def _lines(path: str) -> Iterator[tuple[str, bool]]:
    """(text, ended by a newline) per line; undecodable bytes are replaced, not fatal."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data: bytes = f.read()
    text = data.decode("utf-8", errors="replace")
    parts = text.split("\n")
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if last and not part:
            break
        yield part, not last
