"""The optimizer sweep (not part of `make test`): each optimizer of optimizers.py trains
the healthy scripts of train.py, first without gradscope (the loss must fall and the
weights stay finite: a run that does not train is no false alarm), then under watch; a
markdown table of the findings (id, severity) per optimizer and script.

    PYTHONPATH=$PWD:<the optimizers' packages> python tests/watcher/optimizer_scripts/sweep.py \
        [--models lm,cnn] [--only NAME,...] [--steps 300]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import signal
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def health(model: str, name: str, steps: int) -> str | None:
    """None for a healthy run; else why it is not one."""
    import train

    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first, last, finite = train.main(model, name, steps)
    if not finite:
        return "weights not finite"
    if not last < 0.9 * first:
        return f"loss {first:.2f} -> {last:.2f}"
    return None


def findings(model: str, name: str, steps: int) -> str:
    from gradscope.findings import Severity
    from gradscope.watcher import watch_script

    report = watch_script(
        os.path.join(HERE, "train.py"), [model, name, str(steps)], quiet_stdout=True
    )
    got = [f for f in report.findings if f.severity >= Severity.INFO]
    faults = ["fault"] * len(report.faults)
    return ", ".join([f"{f.rule} {f.severity.name.lower()}" for f in got] + faults) or "-"


def _late(signum: int, frame: object) -> None:
    raise TimeoutError("over --limit seconds")


def main() -> None:
    import optimizers

    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="lm,cnn")
    parser.add_argument("--only", default="")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--limit", type=int, default=120, help="seconds a cell may take")
    parser.add_argument("--skip", default="kron", help="names not run (too slow)")
    args = parser.parse_args()
    signal.signal(signal.SIGALRM, _late)
    models = args.models.split(",")
    skip = {f"po:{n}" for n in args.skip.split(",")}
    names = args.only.split(",") if args.only else [n for n in optimizers.names() if n not in skip]
    print("| optimizer | " + " | ".join(models) + " |")
    print("|---" * (len(models) + 1) + "|")
    for name in names:
        cells = []
        for model in models:
            start = time.perf_counter()
            signal.alarm(args.limit)
            try:
                unhealthy = health(model, name, args.steps)
                cell = (
                    f"not trained ({unhealthy})" if unhealthy else findings(model, name, args.steps)
                )
            except Exception as e:  # a row, not the sweep's end
                cell = f"skipped: {type(e).__name__}: {str(e).splitlines()[0][:80]}"
            signal.alarm(0)
            cells.append(cell)
            print(f"  {name} {model} {time.perf_counter() - start:.1f}s", file=sys.stderr)
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
