"""Run a training script under a distributed Session: the standalone entry point.

`torchrun --nproc_per_node=2 -m gradscope.distributed train.py -- ARGS` runs
train.py on each rank as `python train.py ARGS` would, with the Session's
hooks in place; rank 0 prints the merged report (or writes JSON), the other
ranks print nothing but errors. The user's prints go to stderr so that a
report on stdout stays clean.
"""

from __future__ import annotations

import contextlib
import json
import os
import runpy
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from gradscope.errors import ExitCode
from gradscope.findings import Severity


@dataclass(frozen=True)
class Options:
    script: str
    argv: tuple[str, ...] = ()
    every: int = 100
    output: str | None = None
    """Write the report as JSON here (rank 0) instead of text on stdout."""
    timeout_s: float = 300.0
    fail_on: Severity = Severity.ERROR


def run(opts: Options) -> int:
    """Run the script on this rank; the exit code."""
    from gradscope.distributed.context import RankTimeout
    from gradscope.distributed.merge import render_text
    from gradscope.distributed.session import Session

    if not os.path.isfile(opts.script):
        print(f"gradscope: {opts.script}: no such file", file=sys.stderr)
        return ExitCode.ERROR
    session = Session.start(opts.every, opts.timeout_s)
    old_argv, old_path = sys.argv, list(sys.path)
    sys.argv = [opts.script, *opts.argv]
    sys.path.insert(0, os.path.dirname(os.path.abspath(opts.script)))
    died = None
    try:
        with contextlib.redirect_stdout(sys.stderr):
            runpy.run_path(opts.script, run_name="__main__")
    except RankTimeout as exc:
        print(f"gradscope: {exc}", file=sys.stderr)
        return ExitCode.ERROR
    except (Exception, SystemExit) as exc:
        if isinstance(exc, SystemExit) and exc.code in (0, None):
            pass
        else:
            died = exc
    finally:
        sys.argv, sys.path[:] = old_argv, old_path
    if died is not None:
        return _died(session, died, opts)
    try:
        report = session.finish()
    except RankTimeout as exc:
        print(f"gradscope: {exc}", file=sys.stderr)
        return ExitCode.ERROR
    if report is None:
        print(
            "gradscope: no distributed model ran (no process group, or no DDP or "
            "fully_shard model)",
            file=sys.stderr,
        )
        return ExitCode.ERROR
    if session.is_main:
        _write(render_text(report), report.to_dict(), opts.output)
    return ExitCode.FINDINGS if report.failed(opts.fail_on) else ExitCode.OK


def _died(session, exc: BaseException, opts: Options) -> int:
    """The script raised: explain DDP's usage errors, else report it as the user's error."""
    from gradscope.distributed.merge import render_text

    findings = session.explain(exc)
    session.close()
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if not findings or session.rank is None:
        print(
            f"gradscope: rank {_rank(session)}: the script raised {type(exc).__name__}: {first}",
            file=sys.stderr,
        )
        return ExitCode.ERROR
    report = session.report(died=f"{type(exc).__name__}: {first[:160]}")
    report.findings = findings
    text = render_text(report)
    if session.is_main:
        _write(text, report.to_dict(), opts.output)
    else:  # rank 0 may be stuck in a collective: this rank's explanation is the error
        sys.stderr.write(f"[rank {session.rank.rank}] " + text)
    return ExitCode.FINDINGS


def _rank(session) -> str:
    return str(session.rank.rank) if session.rank is not None else os.environ.get("RANK", "?")


def _write(text: str, doc: dict, output: str | None) -> None:
    if output is None:
        sys.stdout.write(text)
        return
    from gradscope.report.write import write_file

    write_file(output, json.dumps(doc, indent=2) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    args = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in args:
        cut = args.index("--")
        args, extra = args[:cut], args[cut + 1 :]
    parser = argparse.ArgumentParser(
        prog="python -m gradscope.distributed",
        description="Run a DDP or FSDP2 training script with gradscope's cross-rank checks "
        "(launch with torchrun).",
    )
    parser.add_argument("script")
    parser.add_argument("--every", type=int, default=100, help="forwards between gatherings")
    parser.add_argument("--output", "-o", help="write the JSON report here (rank 0)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per gathering")
    ns = parser.parse_args(args)
    return run(Options(ns.script, tuple(extra), ns.every, ns.output, ns.timeout))
