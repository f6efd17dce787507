"""Cost of `gradscope diff` against two bare forward+backward passes, in one process.

Times are the process's CPU time (one thread by default), best of N after a warm-up:
on a shared machine, wall time measures the neighbours.

    PYTHONPATH=. python tests/diff/bench_diff.py [--dim 256 --layers 4 --seq 128 --repeats 5]

Models: the HuggingFace GPT-2 (eager attention) and the hand-written port of
tests/diff/diff_ports.py at the given size; a correct port (2 passes) and one with a
seeded bug (4 passes: the second seed looks for randomness). Not collected by pytest.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

sys.path.insert(0, __file__.rpartition("/")[0])
import diff_ports as ports

from gradscope.diff import diff


def bare(model, batch, loss_fn) -> float:
    start = time.process_time()
    loss = loss_fn(model(**batch))
    loss.backward()
    took = time.process_time() - start
    model.zero_grad(set_to_none=True)
    return took


def best(f, repeats: int) -> float:
    """Best of `repeats` after a warm-up: the machine may be shared, and other load only
    ever adds time."""
    f()
    return min(f() for _ in range(repeats))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    ports.DIM, ports.LAYERS, ports.SEQ, ports.HEADS = a.dim, a.layers, a.seq, 4
    ports.VOCAB, ports.POSITIONS = 512, a.seq
    ports._PROBE = torch.randn(2, a.seq, a.dim)
    ref, batch, loss_fn = ports.gpt2_ref()
    batch = {"input_ids": torch.randint(0, ports.VOCAB, (2, a.seq))}
    for bug in ((), ("scale",)):
        new = ports.GPT2Port(set(bug)).eval()
        base = best(
            lambda new=new: bare(ref, batch, loss_fn) + bare(new, batch, loss_fn), a.repeats
        )

        def timed(new=new) -> float:
            start = time.process_time()
            diff(ref, new, batch, loss_fn)
            return time.process_time() - start

        took = best(timed, a.repeats)
        result = diff(ref, new, batch, loss_fn)
        print(
            f"{'port with ' + bug[0] + ' bug' if bug else 'correct port':22} "
            f"{result.verdict():26} passes {result.passes}  two bare fwd+bwd {base * 1e3:7.1f} ms  "
            f"diff {took * 1e3:7.1f} ms  ratio {took / base:4.2f}x  "
            f"(threads {torch.get_num_threads()}, best of {a.repeats})"
        )


if __name__ == "__main__":
    main()
