"""A failure of gradscope's own inside a hook (`Fault`): never raised into the training,
kept for the report, which ends the run with exit 3. What counts as one: any Exception
of gradscope's part of a hook, except those of `passing`."""

from __future__ import annotations

import signal
import traceback
from dataclasses import dataclass
from typing import Any

PASSING = ("RankTimeout", "AcceleratorError")
"""Exceptions of gradscope's hooks that still end the run, named here so that this
module loads no torch: a rank's timeout (gradscope.distributed.context), and the
device's own error (torch.AcceleratorError: a device-side assert or an illegal access
of the script's kernels, which surfaces at the next sync, often gradscope's read-back,
and at the script's next operation anyway)."""


@dataclass(frozen=True)
class Fault:
    """Where gradscope failed and what it switched off."""

    part: str
    """The hook point that failed: "the optimizer's post-step hook"."""
    step: int
    """The step under way (1-based): one more than the steps numbered before it."""
    error: str
    """"ZeroDivisionError: float division by zero"."""
    trace: str
    """The whole traceback, gradscope's own frames included (--debug prints it)."""
    thread: str | None = None
    """The thread it failed in, when not the watching one."""
    whole: bool = True
    """The whole watch switched off (False: only the part that failed)."""
    ended: bool = False
    """It reached the script and ended the training (no guard caught it)."""

    def note(self) -> str:
        """The report's internal-error note."""
        where = f" in thread {self.thread!r}" if self.thread else ""
        head = f"internal error: gradscope failed in {self.part} at step {self.step}{where}"
        if self.ended:
            what = "it reached the script, which stopped there"
        elif self.whole:
            what = "the watch was switched off there and training went on"
        else:
            what = f"{self.part} was switched off there; the rest of the watch went on"
        return f"{head} ({self.error}): {what}. This is a bug in gradscope: please report it"


def passing(exc: BaseException) -> bool:
    """An exception gradscope's hook must let through: not a failure of its own (a
    rank's timeout, or what a signal handler of the script raised while gradscope's
    code happened to run: a DataLoader's on a killed worker)."""
    if not isinstance(exc, Exception) or type(exc).__name__ in PASSING:
        return True
    return _from_signal_handler(exc)


def _from_signal_handler(exc: BaseException) -> bool:
    codes = set()
    for number in signal.valid_signals():
        try:
            handler = signal.getsignal(number)
        except (OSError, ValueError):
            continue
        function = getattr(handler, "__func__", handler)
        code = getattr(function, "__code__", None)
        if code is not None:
            codes.add(code)
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code in codes:
            return True
        tb = tb.tb_next
    return False


def fault_of(part: str, step: int, exc: BaseException, thread: str | None, whole: bool) -> Fault:
    detail = (str(exc).strip().splitlines() or [""])[0]
    return Fault(
        part,
        step,
        f"{type(exc).__name__}: {detail}".rstrip(": "),
        "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
        thread,
        whole,
    )


def record(state: Any, fault: Fault) -> None:
    """Keep the fault (once per part: later ones of a part follow from its first) and
    say it in the notes."""
    if all(f.part != fault.part for f in state.faults):
        state.faults.append(fault)
        state.notes.append(fault.note())
