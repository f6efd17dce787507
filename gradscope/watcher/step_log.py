"""`--log FILE`: every step read back written as a JSON line as the run goes, the
findings as the last line (what `gradscope diff` reads)."""

from __future__ import annotations

import os
from typing import Any, BinaryIO

from gradscope.safe_json import dumps
from gradscope.steps.noise import Smoother
from gradscope.steps.records import StepRecord


class StepLog:
    """--log FILE: one JSON line per step, written (and flushed) at every read-back.

    The file is opened at the first read-back, so a run that records no step leaves an
    existing file as it was. A write that fails (a full disk, /dev/full, a folder made
    unwritable) never reaches the script: logging stops, a partly written batch is cut
    back to the last whole line, and `failure` says what happened, for the report.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.file: BinaryIO | None = None
        self.names: list[str] = []
        self.logged = 0
        self.good = 0
        """Bytes of whole lines written so far."""
        self.failure: str | None = None
        self.last_step: int | None = None
        """The last step written whole."""
        self.noise: dict[int, Any] = {}
        """Per optimizer, the noise scale's smoother: each line's `b_simple`."""

    def write(self, records: list[StepRecord], names: list[str], params: list[Any]) -> None:
        """A header line when the tracked parameters change: their names, and the dtype
        most of their elements have, so `gradscope diff` of two logs knows which
        tolerance is fair."""
        if self.failure is not None or not records:
            return
        lines = []
        if names != self.names:
            dtype = _main_dtype(params)
            lines.append(dumps({"params": list(names), **({"dtype": dtype} if dtype else {})}))
        lines += [dumps(self._line(r)) for r in records]
        data = ("\n".join(lines) + "\n").encode()
        try:
            if self.file is None:
                self.file = open(self.path, "wb")
            self.file.write(data)
            self.file.flush()
        except OSError as exc:
            self._stop(exc, records[0].step)
            return
        self.names = list(names)
        self.logged += len(records)
        self.last_step = records[-1].step
        self.good += len(data)

    def _line(self, r: StepRecord) -> dict[str, Any]:
        """The step's object, with the smoothed noise scale where it was measured."""
        out = r.to_dict()
        if r.micro_batches > 1:
            point = self.noise.setdefault(r.optimizer, Smoother()).add(r)
            out["b_simple"] = point.b_simple if point is not None else None
        return out

    def _stop(self, exc: OSError, step: int) -> None:
        self.failure = (
            f"--log {self.path}: writing failed at step {step} ({exc.strerror or exc}); "
            f"the log stops after {self.logged} steps, the report covers them all"
        )
        self._cut()

    def _cut(self) -> None:
        if self.file is not None:
            try:  # no half line: cut back to the last whole one (not on a pipe or device)
                os.ftruncate(self.file.fileno(), self.good)
            except (OSError, ValueError):
                pass

    def end(self, findings: list[Any] | None) -> None:
        """The last line, `{"findings": [...]}`: the run's findings as the JSON report has
        them (`explained_by`, a precursor's `lead`), so the log alone says what was judged.
        Only after steps were logged whole: a log that failed or holds none gets none, and
        a child the script forked (None) writes nothing into its parent's log."""
        if self.file is not None and self.failure is None and findings is not None:
            line = dumps({"findings": [f.to_dict() for f in findings]})
            data = (line + "\n").encode()
            try:
                self.file.write(data)
                self.file.flush()
                self.good += len(data)
            except OSError as exc:
                self.failure = (
                    f"--log {self.path}: writing the findings failed ({exc.strerror or exc}); "
                    f"the log holds the {self.logged} steps, the report has the findings"
                )
                self._cut()
        self.close()

    def close(self) -> None:
        if self.file is None:
            return
        try:
            self.file.close()
        except OSError as exc:  # what was still buffered could not be written
            if self.failure is None:
                after = f" after step {self.last_step}" if self.last_step is not None else ""
                self.failure = f"--log {self.path}: the last write failed{after} ({exc.strerror})"


def _main_dtype(params: list[Any]) -> str | None:
    """The dtype most of the parameters' elements have ("float32"); None without any."""
    counts: dict[str, int] = {}
    for p in params:
        name = str(p.dtype).removeprefix("torch.")
        counts[name] = counts.get(name, 0) + p.numel()
    return max(counts, key=lambda k: counts[k]) if counts else None
