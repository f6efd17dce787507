"""`--nproc-per-node N`: run the same gradscope command under torchrun, N ranks here.

gradscope re-executes `python -m torch.distributed.run --standalone --nproc_per_node N
-m -- gradscope ARGS` (ARGS: this command line without the flag) and returns rank 0's
exit code: rank 0 writes it to a file named by GRADSCOPE_EXIT_FILE, because torchrun
itself turns any rank's non-zero exit into 1. No torch import here (a subprocess).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence

FLAG = "--nproc-per-node"
EXIT_FILE = "GRADSCOPE_EXIT_FILE"


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


def relaunch(nproc: int, args: Sequence[str]) -> int:
    """Run under torchrun and return rank 0's exit code (torchrun's when rank 0 wrote none)."""
    fd, exit_file = tempfile.mkstemp(prefix="gradscope-exit-")
    os.close(fd)
    env = {**os.environ, EXIT_FILE: exit_file}
    try:
        code = subprocess.run(torchrun_command(nproc, args), env=env, check=False).returncode
        with open(exit_file, encoding="utf-8") as f:
            written = f.read().strip()
        return int(written) if written else code
    except KeyboardInterrupt:
        return 130
    finally:
        os.unlink(exit_file)


def record_exit(code: int) -> None:
    """On rank 0 of a relaunched run: leave the exit code for the launching process."""
    path = os.environ.get(EXIT_FILE)
    if not path:
        return
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(str(int(code)))
    except OSError:
        pass
