"""`--nproc-per-node N`: run the same gradscope command under torchrun, N ranks here.

gradscope re-executes `python -m torch.distributed.run --standalone --nproc_per_node N
-m -- gradscope ARGS` (ARGS: this command line without the flag) and exits with a code
of gradscope's contract (`exit_code`): rank 0 writes its own to a file named by
GRADSCOPE_EXIT_FILE, because torchrun itself turns any rank's failure into 1, which
would read as "findings"; having left it, a rank 0 with findings exits 0, so torchrun
prints no failure report of its own over the run's report. No torch import here.

torchrun runs in a session of its own, so that a signal reaches it once: the launcher
forwards the SIGTERM, SIGINT or SIGHUP it gets (from `timeout`, Kubernetes, Ctrl-C) and
torchrun stops the ranks with it, each writing what it has. If the launcher itself is
killed, torchrun gets SIGTERM from the kernel (Linux), so no rank is left running.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from typing import Any

FLAG = "--nproc-per-node"
EXIT_FILE = "GRADSCOPE_EXIT_FILE"
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

OK, FINDINGS, ERROR, INTERNAL = 0, 1, 2, 3
GRADSCOPE_CODES = frozenset({OK, FINDINGS, ERROR, INTERNAL, 130, 143})
"""gradscope's exit codes (gradscope.errors.ExitCode, not imported: no torch here)."""


def without_flag(args: Sequence[str]) -> list[str]:
    """`args` with `--nproc-per-node N` (or `=N`) removed; what follows `--` is the
    script's and kept as it is."""
    out: list[str] = []
    rest = list(args)
    while rest:
        a = rest.pop(0)
        if a == "--":
            return [*out, a, *rest]
        if a == FLAG:
            if rest:
                rest.pop(0)
            continue
        if a.startswith(FLAG + "="):
            continue
        out.append(a)
    return out


def torchrun_command(nproc: int, args: Sequence[str]) -> list[str]:
    """The command that runs `gradscope ARGS` (without the flag) on `nproc` local ranks."""
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        str(nproc),
        "-m",
        "--",  # torchrun's parser would take --log (a prefix of --log-dir) or -t as its own
        "gradscope",
        *without_flag(args),
    ]


def exit_code(torchrun_code: int, rank0_code: int | None, signalled: int | None) -> int:
    """The launch's exit code in gradscope's contract (0 ok, 1 findings, 2 the script
    failed or nothing was judged, 3 gradscope failed, 130 Ctrl-C, 143 SIGTERM).

    `signalled`: the signal the launcher got from outside (the run was stopped: 128 + it).
    Otherwise rank 0's own code when it wrote one: it judged the run, and it names a rank
    that failed elsewhere (2). Without one, rank 0 was killed before it could write: a
    run torchrun says failed is 2, never torchrun's 1 ("findings").
    """
    if signalled is not None:
        return 128 + int(signalled)
    if rank0_code is not None and rank0_code in GRADSCOPE_CODES:
        return rank0_code
    return OK if torchrun_code == 0 else ERROR


def relaunch(nproc: int, args: Sequence[str]) -> int:
    """Run under torchrun and return the launch's exit code (see `exit_code`)."""
    fd, exit_file = tempfile.mkstemp(prefix="gradscope-exit-")
    os.close(fd)
    env = {**os.environ, EXIT_FILE: exit_file}
    got: list[int] = []
    try:
        proc = subprocess.Popen(
            torchrun_command(nproc, args),
            env=env,
            start_new_session=True,
            preexec_fn=_stop_with_parent(),
        )
        with _forwarding(lambda sig: _forward(proc, sig, got)):
            code = proc.wait()
        return exit_code(code, read_exit(exit_file), got[0] if got else None)
    finally:
        os.unlink(exit_file)


def _forward(proc: subprocess.Popen[Any], sig: int, got: list[int]) -> None:
    got.append(sig)
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(sig)


@contextlib.contextmanager
def _forwarding(handler: Callable[[int], None]) -> Iterator[None]:
    """While the block runs, the signals in FORWARDED go to `handler` instead of ending
    this process (or raising KeyboardInterrupt)."""
    previous = {}
    for sig in FORWARDED:
        with contextlib.suppress(OSError, ValueError):
            previous[sig] = signal.signal(sig, lambda number, _frame: handler(number))
    try:
        yield
    finally:
        for sig, old in previous.items():
            with contextlib.suppress(OSError, ValueError, TypeError):
                signal.signal(sig, old)


def _stop_with_parent() -> Callable[[], None] | None:
    """What torchrun runs before it starts (Linux): SIGTERM when the launcher dies, so a
    killed launcher leaves no run behind. Looked up here, in the parent: between fork and
    exec the child only makes the call."""
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    term = int(signal.SIGTERM)

    def set_death_signal() -> None:
        prctl(1, term)  # PR_SET_PDEATHSIG

    return set_death_signal


def read_exit(path: str) -> int | None:
    """The code rank 0 left in `path` (None: it wrote none)."""
    try:
        with open(path, encoding="utf-8") as f:
            written = f.read().strip()
        return int(written) if written else None
    except (OSError, ValueError):
        return None


def record_exit(code: int) -> bool:
    """On rank 0 of a relaunched run: leave the exit code for the launching process.
    True when it is left: with findings rank 0 then exits 0, so that torchrun does not
    print its ChildFailedError report ("gradscope FAILED ... Root Cause") over a run that
    reported itself; the launcher exits with the code left here."""
    path = os.environ.get(EXIT_FILE)
    if not path:
        return False
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(str(int(code)))
    except OSError:
        return False
    return True
