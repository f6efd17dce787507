"""What the hang watchdog (gradscope.distributed.watchdog) says of a stuck run: each rank's
answer (RankState), where its main thread waits, and the block the run ends with."""

from __future__ import annotations

import json
import linecache
import os
from dataclasses import asdict, dataclass
from types import FrameType

from gradscope.errors import ExitCode, is_user_file, short_path

EXIT_CODE = ExitCode.ERROR
"""Like a timed-out gathering (RankTimedOut): the run could not finish, exit 2."""
WRAPPERS = frozenset({"_wrapped_call_impl", "_call_impl", "wrapper", "_fn", "inner"})
"""torch's call wrappers, passed over when naming the call a thread waits in."""


@dataclass(frozen=True)
class RankState:
    """One rank's answer: how far it got and where its main thread is."""

    rank: int
    forwards: int
    steps: int
    idle_s: float
    stuck: bool
    where: str
    """The innermost line of the user's code, `file:line` ('' when none)."""
    line: str
    """That line's source text."""
    call: str
    """The library function it waits in (`all_reduce`, `barrier`, `Tensor.backward`...)."""
    beat: int = 0
    """Counts a working rank's answers, so a rank that stops answering is seen as silent."""
    ended: bool = False
    """Its script ended: it will join no collective any more (counts as stuck)."""
    child: str = ""
    """The child process its main thread waits for, `PID (command)` ('' when none)."""

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str | bytes) -> RankState:
        return cls(**json.loads(text))


def _name(frame: FrameType) -> str:
    return str(getattr(frame.f_code, "co_qualname", frame.f_code.co_name))


def blocked_at(frame: FrameType | None) -> tuple[str, str, str]:
    """(file:line, source line, call) of a thread's stack, innermost `frame` first.

    file:line is the innermost frame of the user's own code; call is the library function
    that line waits in: the innermost public torch.distributed function (`all_reduce`,
    `barrier`), else the function the user's line called, past torch's call wrappers.
    """
    frames: list[FrameType] = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    user = next((i for i, f in enumerate(frames) if is_user_file(f.f_code.co_filename)), None)
    where = line = ""
    if user is not None:
        f = frames[user]
        where = f"{short_path(f.f_code.co_filename)}:{f.f_lineno}"
        line = linecache.getline(f.f_code.co_filename, f.f_lineno or 0).strip()
    inner = frames[:user] if user is not None else frames
    call = next((_name(f) for f in inner if _is_collective(f)), "")
    if not call:  # what the user's line called, or the innermost frame without one
        order = reversed(inner) if user is not None else iter(inner)
        call = next((_name(f) for f in order if f.f_code.co_name not in WRAPPERS), "")
    return where, line, call


def _is_collective(frame: FrameType) -> bool:
    path = frame.f_code.co_filename.replace(os.sep, "/")
    name = frame.f_code.co_name
    return "torch/distributed/" in path and not name.startswith("_") and name not in WRAPPERS


def describe(state: RankState) -> str:
    """`rank 1: 3 optimizer steps, waiting in all_reduce at train.py:44: dist.all_reduce(t)`."""
    text = f"rank {state.rank}: {state.steps} optimizer step{'s' * (state.steps != 1)}, "
    if state.ended:
        return text + "its script ended"
    text += "waiting" if state.stuck else f"busy (moved {state.idle_s:.0f} s ago)"
    if state.child:
        text += f" {'for' if state.stuck else 'with'} its child process {state.child}"
    if state.call:
        text += f" in {state.call}"
    if state.where:
        text += f" at {state.where}"
        if state.line:
            text += f": {state.line}"
    return text


def summary(states: dict[int, RankState], world: int, timeout_s: float) -> list[str]:
    """The block a stuck run prints: one line per rank, then what it means."""
    lines = [f"the run is stuck: no rank made progress for {timeout_s:g} s"]
    for r in range(world):
        state = states.get(r)
        if state is None:
            lines.append(f"  rank {r}: no answer: it died or is stuck outside Python")
        else:
            lines.append("  " + describe(state))
    silent = [r for r in range(world) if r not in states]
    places = {(s.call, s.where) for s in states.values()}
    steps = {s.steps for s in states.values()}
    ended = [r for r, s in sorted(states.items()) if s.ended]
    parents = [r for r, s in sorted(states.items()) if s.child and not s.ended]
    if silent:
        lines.append(f"the other ranks wait for rank {_ranks(silent)}")
    elif ended:
        lines.append(f"the others wait in a collective rank {_ranks(ended)} never joined")
    elif parents:
        others = [r for r in sorted(states) if r not in parents]
        lines.append(
            f"rank {_ranks(parents)} {'waits' if len(parents) == 1 else 'wait'} for a child "
            f"process of its own, not in a collective: the child used no CPU and did no I/O "
            f"for {timeout_s:g} s"
            + (
                f", and rank {_ranks(others)} {'waits' if len(others) == 1 else 'wait'} "
                f"for rank {_ranks(parents)}"
                if others
                else ""
            )
            + "; the processes the ranks started are stopped too"
        )
    elif len(places) > 1 or len(steps) > 1:
        lines.append(
            "the ranks wait in different places: a collective issued on some ranks only "
            "(or in a different order) never completes"
        )
    lines.append(f"stopping every rank (exit {int(EXIT_CODE)}); set the limit with --hang-timeout")
    return lines


def _ranks(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks))
