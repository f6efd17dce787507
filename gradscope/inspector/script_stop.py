"""The stop at a script's backward, made impossible to swallow.

gradscope stops a training script by raising `Stop` from its first
`backward()`, or, with a step asked for, from the first `backward()` after
the optimizer step before it (steps are counted as `gradscope watch` counts
them: every optimizer step, a GradScaler's skipped ones included). A script
can catch any exception (a bare `except:`, `except BaseException`,
`contextlib.suppress(BaseException)`), so the stop is enforced three ways once it has been raised:

1. every later `backward()`, `torch.autograd.backward()` and optimizer step
   (all `torch.optim` optimizers, through the global step pre-hook) raises
   it again, so no optimizer step ever runs;
2. a line tracer watches the user's own frames (not gradscope, installed
   packages or the standard library): a handler may run while the stop
   passes through it (logging, cleanup, `raise`), but once the script goes on
   as if nothing happened, the stop is raised again at its next call, and a
   handler of a frame that already swallowed it once re-raises at its first
   line, so it leaves that frame;
3. what the script did after the stop (where it caught it, the calls that
   were refused, whether it ran to its end) is kept and said in the report.

CPython turns a trace function off when it raises, and a profile function
likewise; each of the two re-arms the other, so whichever raised, the other
is still watching. Nothing is traced before the first backward.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import CodeType, FrameType
from typing import Any, NoReturn

import torch

from gradscope.errors import is_user_file, short_path
from gradscope.taken_derivatives import TakenDerivatives

_RESUMABLE = 0x20 | 0x80 | 0x100 | 0x200
"""CO_GENERATOR, CO_COROUTINE, CO_ITERABLE_COROUTINE, CO_ASYNC_GENERATOR: a frame whose
'call' may be its close() while the stop unwinds the loop that iterated it."""
_FINALISERS = ("__exit__", "__aexit__", "__del__")


class Stop(BaseException):
    """gradscope's stop; a BaseException, so `except Exception` lets it by."""

    def __str__(self) -> str:
        return "gradscope stopped the script at the backward() it inspects (one step)"


FIRST_NONFINITE = "first-nonfinite"
"""The step asked for: the first whose loss or gradients are non-finite."""


@dataclass(frozen=True)
class Capture:
    """The first backward: the tensor it was called on, its gradient argument, and where."""

    loss: torch.Tensor
    gradient: torch.Tensor | None
    where: str
    """file:line of the call in the user's code ('' when no frame of theirs was found)."""


class Stopper:
    """Holds the first backward and keeps the script from going on past it."""

    def __init__(
        self,
        base: FrameType | None = None,
        on_capture: Callable[[], None] = lambda: None,
        step: int | str | None = None,
        on_window: Callable[[], None] = lambda: None,
        unscaled: Callable[[torch.Tensor], torch.Tensor] = lambda loss: loss,
    ) -> None:
        """`step`: None, the first backward; N, the first backward after optimizer step N-1
        (that is, of step N); FIRST_NONFINITE, stop at the first non-finite loss or gradients
        and note the step in `found` (nothing is captured). `on_window`: called once the
        backward to stop at is the next one (step N-1 done). `unscaled`: the loss a
        GradScaler scaled, as the script computed it (its overflow is the scaler's to skip)."""
        self._unscaled = unscaled
        self.step = step
        self.steps = 0
        """Optimizer steps made so far (watch's count: a GradScaler's skipped ones too)."""
        self.found: int | None = None
        """FIRST_NONFINITE: the first step with a non-finite loss or gradients."""
        self.found_by = ""
        self._on_window = on_window
        self.capture: Capture | None = None
        self.error: str | None = None
        """Why the first backward cannot be inspected (several tensors), if so."""
        self.refused: Counter[str] = Counter()
        self.derivatives = TakenDerivatives()
        """The derivatives the script took with create_graph (stop_patches.installed)."""
        self.caught_at: str | None = None
        """Where the script first went on after catching the stop (file:line)."""
        self._on_capture = on_capture
        self._swallowers: list[FrameType] = []
        self._unwinding: list[FrameType] = []
        """The script's frames the stop is passing through, before a handler runs."""
        self._user: dict[CodeType, bool] = {}
        self._saved: tuple[Any, Any] | None = None
        self._base = base  # gradscope's frame that runs the script: frames below are not watched

    # --- counting steps ----------------------------------------------------------------------

    @property
    def stopped(self) -> bool:
        return self.capture is not None or self.error is not None or self.found is not None

    def open(self) -> None:
        """Before the script runs: the window opens now when the first backward is the one."""
        if self.step is None or self.step == 1:
            self._on_window()

    def step_done(self) -> None:
        """An optimizer step finished (or a GradScaler skipped one)."""
        self.steps += 1
        if isinstance(self.step, int) and self.steps == self.step - 1:
            self._on_window()

    def wants(self, loss: torch.Tensor | list[torch.Tensor]) -> bool:
        """Whether this backward is the one to stop at (else it runs as the script wrote it)."""
        if self.stopped:
            return True  # refused
        if self.step == FIRST_NONFINITE:
            if not _finite(
                [self._unscaled(t) for t in (loss if isinstance(loss, list) else [loss])]
            ):
                self.found, self.found_by = self.steps + 1, "loss"
                self._arm()
                raise Stop()
            return False
        return self.step is None or self.steps >= int(self.step) - 1

    def check_gradients(self, optimizer: Any) -> None:
        """FIRST_NONFINITE, before a step: stop if the gradients it would apply are non-finite
        (not for a step a fused optimizer skips: its scaler found them so)."""
        if self.step != FIRST_NONFINITE or self.stopped:
            return
        found_inf = getattr(optimizer, "found_inf", None)
        if isinstance(found_inf, torch.Tensor) and bool(found_inf.any()):
            return
        grads = [
            g
            for group in optimizer.param_groups
            for p in group["params"]
            if (g := _local(p.grad)) is not None
        ]
        if not grads:
            return
        try:  # the max |grad|: no copy, no overflow of a float16 sum, NaN kept
            with torch.no_grad():
                peaks = torch._foreach_norm([g.detach() for g in grads], float("inf"))
                device = peaks[0].device
                finite = bool(
                    torch.isfinite(torch.stack([p.float().to(device) for p in peaks])).all()
                )
        except Exception:  # gradients it cannot read: the script's step comes first
            return
        if finite:
            return
        self.found, self.found_by = self.steps + 1, "gradients"
        self._arm()
        raise Stop()

    # --- raising -------------------------------------------------------------------------

    def first_backward(self, loss: torch.Tensor, gradient: torch.Tensor | None) -> NoReturn:
        """Called by the patched backward: keep the first loss, stop; refuse any later one."""
        if self.capture is None and self.error is None and self.found is None:
            self.capture = Capture(loss, gradient, self._where())
            self._on_capture()
            self._arm()
            raise Stop()
        self.refuse("backward()")

    def refuse(self, what: str) -> NoReturn:
        """A call that would train on after the stop: counted, and the stop raised again."""
        self.refused[what] += 1
        self._arm()
        raise Stop()

    def fail(self, message: str) -> NoReturn:
        """A first backward gradscope cannot inspect: stop the script, report `message`."""
        self.error = message
        self._arm()
        raise Stop()

    # --- the tracer and the profiler -----------------------------------------------------

    def _is_user(self, code: CodeType) -> bool:
        known = self._user.get(code)
        if known is None:
            name = code.co_filename
            known = is_user_file(name)
            known = known and code.co_name not in _FINALISERS
            self._user[code] = known
        return known

    def _script_frames(self) -> Iterator[FrameType]:
        """The user's frames on the stack, newest first, above gradscope's own."""
        frame: FrameType | None = sys._getframe(2)
        while frame is not None and frame is not self._base:
            if self._is_user(frame.f_code):
                yield frame
            frame = frame.f_back

    def _where(self) -> str:
        for frame in self._script_frames():
            return f"{short_path(frame.f_code.co_filename)}:{frame.f_lineno}"
        return ""

    def _arm(self) -> None:
        if self._saved is None:
            self._saved = (sys.gettrace(), sys.getprofile())
        self._arm_profile()
        self._arm_trace()

    def _arm_trace(self) -> None:
        if sys.gettrace() is not self._on_call:
            sys.settrace(self._on_call)
        for frame in self._script_frames():
            if frame.f_trace is not self._on_line:
                frame.f_trace = self._on_line
                frame.f_trace_lines = True

    def _arm_profile(self) -> None:
        if sys.getprofile() is not self._on_profile:
            sys.setprofile(self._on_profile)

    def disarm(self) -> None:
        """Tracing and profiling back as they were (call once the script has ended)."""
        saved, self._saved = self._saved, None  # first: the calls below are profiled too
        if saved is not None:
            sys.setprofile(saved[1])
            sys.settrace(saved[0])
        self._swallowers.clear()
        self._unwinding.clear()

    def _on_call(self, frame: FrameType, event: str, arg: Any) -> Any:
        return self._on_line if self._is_user(frame.f_code) else None

    def _on_line(self, frame: FrameType, event: str, arg: Any) -> Any:
        if self._saved is None:
            return self._on_line
        if event == "exception" and isinstance(arg[1], Stop):
            if all(f is not frame for f in self._unwinding):
                self._unwinding.append(frame)  # until a handler's line runs, or it returns
            return self._on_line
        if event in ("line", "return") and self._unwinding:
            self._unwinding = [f for f in self._unwinding if f is not frame]
        if event != "line":
            return self._on_line
        self._arm_profile()
        handling = sys.exc_info()[1]
        if isinstance(handling, Stop):
            if any(f is frame for f in self._swallowers):
                raise Stop()  # this frame swallowed it before: leave through this handler
            return self._on_line  # a handler runs as the stop passes: let it
        if handling is None or isinstance(handling, Exception):
            self._swallowed(frame)  # raised at its next call, so its handler runs traced
        return self._on_line

    def _on_profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if self._saved is None:
            return
        if sys.gettrace() is not self._on_call:
            self._arm_trace()
        if event not in ("call", "c_call"):
            return
        caller = frame if event == "c_call" else frame.f_back
        if not (self._is_user(frame.f_code) or (caller and self._is_user(caller.f_code))):
            return
        if any(f is caller for f in self._unwinding):
            # the stop is unwinding the script's frame, which runs no code of its own: a
            # call now is an object it held being collected (a loader's iterator, its
            # weakref callbacks, a worker pool's __del__), not the script going on
            return
        if frame.f_code.co_name in _FINALISERS:
            return  # a `with` block closing (its state must be restored), an object collected
        if event == "call" and frame.f_code.co_flags & _RESUMABLE:
            # a generator resumed: by the script's loop, or closed (GeneratorExit) as the
            # stop unwinds that loop (a DataLoader's sampler). Not the script going on; if it
            # did go on, its next call of anything else raises the stop again.
            return
        handling = sys.exc_info()[1]
        if handling is None or isinstance(handling, Exception):
            user = frame if self._is_user(frame.f_code) else caller
            if user is not None:
                self._swallowed(user)
            raise Stop()

    def _swallowed(self, frame: FrameType) -> None:
        if self.caught_at is None:
            self.caught_at = f"{short_path(frame.f_code.co_filename)}:{frame.f_lineno}"
        if not any(f is frame for f in self._swallowers):
            self._swallowers.append(frame)

    # --- what the script did after the stop ------------------------------------------------

    def carried_on(self, ended: str | None) -> str | None:
        """One sentence for the report when the script did not simply stop; else None.

        `ended`: how the run ended when it was not by the stop itself
        ("ran to its end", "then called sys.exit(1)", "then raised KeyError").
        """
        if self.caught_at is None and not self.refused and ended is None:
            return None
        if self.caught_at:
            text = f"the script caught gradscope's stop and went on at {self.caught_at}"
        elif ended:
            text = "the script caught gradscope's stop"
        else:
            text = "the script went on after gradscope's stop"
        if self.refused:
            text += "; refused: " + ", ".join(
                f"{what} ×{n}" for what, n in sorted(self.refused.items())
            )
        text += f"; {ended}" if ended else "; stopped again"
        return text + "; no optimizer step ran"


def _local(t: torch.Tensor | None) -> torch.Tensor | None:
    """A gradient whose values can be read here: a plain strided tensor (a DTensor's shard)."""
    if t is None:
        return None
    to_local = getattr(t, "to_local", None)
    if to_local is not None and type(t) is not torch.Tensor:
        t = to_local()
    if type(t) is not torch.Tensor or t.is_meta or t.layout != torch.strided:
        return None
    return t


def _finite(losses: list[torch.Tensor]) -> bool:
    """Whether every loss backwarded is finite (one host read); one it cannot read is."""
    try:
        with torch.no_grad():
            return all(
                bool(torch.isfinite(t).all())
                for t in map(_local, [t.detach() for t in losses])
                if t is not None
            )
    except Exception:
        return True
