"""Several 2-rank scenarios in one torchrun launch (scripts/scenario_ranks.py), for tests
that are not about torchrun's own handling of a rank (a launch is 10-20 s here, most of
it starting torchrun's agent and importing torch in three processes; a scenario forked
from a rank that has imported them takes a second or two).

Each scenario is a pair of fresh processes with torchrun's environment and a process
group of its own: what `torchrun -m gradscope ARGS` runs on each rank. Not the same as a
launch where torchrun watches the ranks: a rank that fails does not make torchrun stop
the others, and no scenario's code passes through torchrun's. Tests of those keep a
launch of their own.

Files whose scenarios `share` one launch (tests/scheduling.py's SHARED_LAUNCH: one
pytest-xdist worker runs them) pay for it once between them: a launch's ranks cost about
6.5 s of CPU before their first scenario.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torchrun_launch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RANKS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts", "scenario_ranks.py")
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]


@dataclass
class Scenario:
    """What one scenario's two processes left, in the shape of subprocess's result."""

    codes: list[int]
    """Each rank's exit code."""
    stdout: str
    """Rank 0's stdout, then rank 1's."""
    stderr: str
    """Rank 0's stderr, then rank 1's."""
    wall: float = 0.0
    """Seconds from the scenario's start to its slower rank's end."""

    @property
    def returncode(self) -> int:
        """What torchrun would exit with: 0 when every rank did, 1 otherwise."""
        return 0 if not any(self.codes) else 1


WATCH_MODULES = (
    *("gradscope.watcher.runner", "gradscope.watcher.patches", "torch.distributed.fsdp"),
    *("gradscope.distributed.session", "gradscope.catalogue", "pydantic"),
)
"""What every `gradscope watch` scenario imports: each rank imports it once (the catalogue
loaded: every rule; pydantic: typer checks a command's parameters with it)."""


def launch(
    tmp: Path,
    scenarios: dict[str, list[str]],
    scripts: frozenset[str] = frozenset(),
    preload: tuple[str, ...] = WATCH_MODULES,
):
    """Run `scenarios` (name: the arguments of `python -m gradscope`, or for a name in
    `scripts` a script and its arguments) in one launch; {name: Scenario}, and the
    launch's own result (its stderr says why when a scenario left nothing). `preload`:
    modules each rank imports before it forks the scenarios' processes."""
    plan: dict = {"dir": str(tmp), "preload": list(preload), "scenarios": []}
    for name, args in scenarios.items():
        if name in scripts:
            plan["scenarios"].append({"name": name, "script": args[0], "args": args[1:]})
        else:
            plan["scenarios"].append({"name": name, "args": args})
    path = tmp / "plan.json"
    path.write_text(json.dumps(plan))
    for _ in range(2):  # torch's teardown abort (torchrun_launch.py), in a scenario's stderr
        proc = torchrun_launch.run([*TORCHRUN, RANKS, str(path)], timeout=300, cwd=ROOT)
        found = {name: _read(tmp, name) for name in scenarios}
        if not any(
            s and s.returncode and torchrun_launch.TEARDOWN_ABORT in s.stderr
            for s in found.values()
        ):
            break
    return found, proc


def _read(tmp: Path, name: str) -> Scenario | None:
    try:
        codes = [int((tmp / f"{name}.{r}.code").read_text()) for r in (0, 1)]
        walls = [float((tmp / f"{name}.{r}.wall").read_text()) for r in (0, 1)]
    except (OSError, ValueError):
        return None
    out = [(tmp / f"{name}.{r}.out").read_text() for r in (0, 1)]
    err = [(tmp / f"{name}.{r}.err").read_text() for r in (0, 1)]
    return Scenario(codes, "".join(out), "".join(err), max(walls))


Plan = Callable[[Path], dict[str, list[str]]]
"""A file's scenarios (launch's `scenarios`) for the folder it is given."""
_SHARED: dict[str, tuple[Plan, frozenset[str]]] = {}
_LAUNCHED: dict[str, tuple[Path, dict[str, Scenario | None], object]] = {}


def share(key: str, plan: Plan, scripts: frozenset[str] = frozenset()) -> None:
    """Put the file `key`'s scenarios in this process's shared launch (at its import)."""
    _SHARED[key] = (plan, scripts)


def shared(key: str, tmp_path_factory) -> tuple[Path, dict[str, Scenario | None], object]:
    """`key`'s folder, its scenarios by name and the launch's result. The first call
    launches every plan shared by then that has not run, together."""
    if key not in _LAUNCHED:
        pending = {k: v for k, v in _SHARED.items() if k not in _LAUNCHED}
        folders = {k: tmp_path_factory.mktemp(k) for k in pending}
        scenarios: dict[str, list[str]] = {}
        scripts: set[str] = set()
        for k, (plan, script_names) in pending.items():
            for name, args in plan(folders[k]).items():
                scenarios[f"{k}.{name}"] = args
                scripts.update({f"{k}.{name}"} if name in script_names else ())
        found, proc = launch(tmp_path_factory.mktemp("shared"), scenarios, frozenset(scripts))
        for k in pending:
            mine = {n.split(".", 1)[1]: run for n, run in found.items() if n.startswith(k + ".")}
            _LAUNCHED[k] = (folders[k], mine, proc)
    return _LAUNCHED[key]
