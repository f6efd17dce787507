"""One torchrun launch that runs several 2-rank scenarios in turn (tests/distributed/
shared_launch.py builds the plan and reads the results).

    torchrun --standalone --nproc_per_node=2 scenario_ranks.py PLAN.json

Each rank imports torch, DDP's dynamo, gradscope and the plan's `preload` modules once,
freezes what it holds out of the garbage collector's reach (a forked process that ends
would otherwise walk, and so copy, every object it inherited), then forks one process per
scenario: a new session, as torchrun starts a rank, with torchrun's environment, its
stdout and stderr in files of its own, and a process group of its own (its own store on a
free port, agreed through the agent's store: the scenarios never share a key). The forked
process runs `python -m gradscope ARGS` (or a script) as its main module and ends as
that process would, its threads joined, its atexit handlers run and its output flushed,
then leaves without the interpreter's teardown: a forked process tearing down its modules
writes to, and so copies, the pages it shares with its rank (about 0.27 s of CPU a
process, more than the run itself). The rank writes its exit code and its wall seconds
next to its output. The ranks run the plan in the same order, so scenario N's two
processes meet.
"""

import atexit
import gc
import importlib
import json
import os
import runpy
import socket
import sys
import threading
import time
import traceback
from datetime import timedelta

import torch._dynamo  # noqa: F401  (what DDP imports: paid once, not per scenario)
import torch.distributed as dist

import gradscope.cli  # noqa: F401


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def own_store(name: str, rank: int) -> None:
    """Point this process's env:// rendezvous at a store of the scenario's own."""
    agent = dist.TCPStore(
        os.environ["MASTER_ADDR"],
        int(os.environ["MASTER_PORT"]),
        is_master=False,
        timeout=timedelta(seconds=120),
    )
    key = f"scenario/{name}/port"
    if rank == 0:
        agent.set(key, str(free_port()))
    os.environ["MASTER_PORT"] = agent.get(key).decode()
    os.environ["TORCHELASTIC_USE_AGENT_STORE"] = "False"
    del agent


def end(code: int) -> None:
    """Leave the forked process as its interpreter would up to its teardown (threads,
    atexit, output), with `code`."""
    threading._shutdown()  # type: ignore[attr-defined]  (what Py_Finalize does first)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def run(scenario: dict, out: str, rank: int) -> int:
    """In the forked process: the scenario as its main module; its exit code (an
    exception it let out printed as the interpreter prints it: 1)."""
    os.setsid()
    for fd, suffix in ((1, "out"), (2, "err")):
        target = os.open(f"{out}.{suffix}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(target, fd)
        os.close(target)
    own_store(scenario["name"], rank)
    script = scenario.get("script")
    sys.argv = [script or "gradscope", *scenario["args"]]
    try:
        if script:
            runpy.run_path(script, run_name="__main__")
        else:
            runpy.run_module("gradscope", run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code
        if code is None or isinstance(code, int):
            return code or 0
        print(code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1
    return 0


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        plan = json.load(f)
    rank = int(os.environ["RANK"])
    for module in plan.get("preload", ()):
        importlib.import_module(module)
    if "gradscope.catalogue" in sys.modules:  # every rule module, as a report loads them
        sys.modules["gradscope.catalogue"].load()
    assert threading.active_count() == 1, "a thread before fork"
    gc.freeze()
    for scenario in plan["scenarios"]:
        out = os.path.join(plan["dir"], f"{scenario['name']}.{rank}")
        sys.stdout.flush()
        sys.stderr.flush()
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:
            end(run(scenario, out, rank))
        _, status = os.waitpid(pid, 0)
        with open(f"{out}.code", "w", encoding="utf-8") as f:
            f.write(str(os.waitstatus_to_exitcode(status)))
        with open(f"{out}.wall", "w", encoding="utf-8") as f:
            f.write(f"{time.monotonic() - start:.3f}")


if __name__ == "__main__":
    main()
