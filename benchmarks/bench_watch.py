"""Per-step cost of `gradscope watch` against the same training step unwatched.

In one process, 1 thread (torch.set_num_threads), for a tiny MLP (its 7k parameters
take a few microseconds to read: the watch's fixed cost per step), bench_hosts.py's
4.5k-parameter MLP under AdamW in a plain loop (`plain`), an MLP, the same MLP
updated by hand (no optimizer), a CNN with BatchNorm and a ~10M-parameter GPT (AdamW,
clip_grad_norm_): blocks of STEPS steps, watched and unwatched, interleaved, REPEAT
times; the median over blocks of each block's mean step time (a mean, so that the
read-back at one step in flush_every counts), their difference and their ratio. The
watched blocks run exactly as `gradscope watch` would (default --update-every 25,
--flush-every 10); the one-time discovery scan at a watch's first step is outside the
block. On a shared machine the two medians drift, so gradscope's own time inside its
hooks is also measured directly (perf_counter around each hook) and given as a share of
the bare step: "own".

Each of a run's first 100 steps has its update measured (watcher/updates.py: derived
from Adam's or SGD's state after the step, no copy; the update by hand from a copy), then
one step in `update_every`: blocks of 20 steps are all early steps. Where derived, every
tensor is measured at steps 1-10 (and 26, 51, 76), one tensor in 8 at the other early
steps: a block of 20 steps after a fresh watch (steps 2-21) holds 9 full ones, the worst
20 steps of a run; `--steps 100` weighs them as a run's first 100 steps do. `--later`
measures the steps after the first 100 instead (one in 25 measured).

Memory: gradscope keeps per step one float (64 bits at most) per parameter tensor until
the next read-back (flush_every steps); the measured update takes temporaries of at most
4 MiB at a time (Adam, SGD) or a copy of the parameters updated by hand (a rotating
subset under 2% of their bytes, or all of them up to 16 MiB), during that step only.

    python benchmarks/bench_watch.py [--repeat 5] [--steps 20] [--threads 1] [--later]
    python benchmarks/bench_watch.py --only tiny --later --steps 100 --repeat 15
    python benchmarks/bench_watch.py --only accum --later --cpu   (4 micro-batches a step)
    python benchmarks/bench_watch.py --only gpt --steps 100 --cpu --parts   (own, by part)
    python benchmarks/bench_watch.py --only gpt --steps 100 --cpu --steady-malloc

(the minor page faults a step of each kind are printed: glibc's heap, as the run before
left it, can fault a bare step's activations in afresh, by thousands of pages a step;
`--steady-malloc` keeps freed blocks mapped for both kinds, as bench_inspect.py does)

(the fixed cost: blocks of 100 steps weigh a fresh watch's first steps as a run would)

Prints ratios; not a test (timings on a shared machine are noisy).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

import torch
from bench_inspect import steady_malloc
from torch import nn
from torch.nn import functional as F


def tiny():
    """The fixed cost per step: gradients that take microseconds to read."""
    return mlp(inputs=32, width=64, batch=16)


def plain():
    """bench_hosts.py's 4.5k-parameter MLP (Tanh, AdamW, batch 32) in a plain loop: the
    fixed cost per step of an Adam step, with no host around it."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 32), nn.Tanh(), nn.Linear(32, 1)
    )
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(32, 32)
    y = x[:, :1].clone()

    def step():
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return model, step


def mlp(inputs: int = 256, width: int = 512, batch: int = 256):
    model = nn.Sequential(
        nn.Linear(inputs, width),
        nn.ReLU(),
        nn.Linear(width, width),
        nn.ReLU(),
        nn.Linear(width, 10),
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(batch, inputs), torch.randint(0, 10, (batch,))

    def step():
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return model, step


def by_hand():
    """The MLP updated by hand (no optimizer): gradscope checks after each backward
    whether the weights moved, one small read-back per backward."""
    model = nn.Sequential(
        nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)
    )
    x, y = torch.randn(256, 256), torch.randint(0, 10, (256,))

    def step():
        loss = F.cross_entropy(model(x), y)
        model.zero_grad()
        loss.backward()
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-0.01)

    return model, step


def cnn():
    model = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1),
        nn.BatchNorm2d(64),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(64 * 8 * 8, 10),
    )
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,))

    def step():
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return model, step


def gpt():
    from gradscope.examples.transformer import GPTConfig, make_gpt

    model, batch = make_gpt(
        GPTConfig(vocab=8192, context=64, dim=256, heads=4, layers=10), batch_size=4
    )
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)

    def step():
        loss = model(**batch).loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    return model, step


def charlm():
    """A small character-level LM (65 symbols, context 64, 2 layers of width 128, dropout
    0.1), AdamW with clip_grad_norm_ and a warm-up+cosine LambdaLR stepped per step, a
    fresh batch of 16 sequences each step: the issue-40 rules' probes all run (the loss's
    graph, the scheduler hook, the targets compared, the eval-pass hook on the model)."""
    import math

    from gradscope.examples.transformer import GPTConfig, make_gpt

    config = GPTConfig(vocab=65, context=64, dim=128, heads=4, layers=2, dropout=0.1)
    model, _ = make_gpt(config, batch_size=16)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    lr = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 100) * 0.5 * (1 + math.cos(math.pi * s / 1e5))
    )
    data = torch.randint(0, 65, (64, 16, 65))

    def step(k: int = 1):
        batch = data[lr.last_epoch % 64]
        opt.zero_grad()
        for tokens in batch.chunk(k):
            loss = model(idx=tokens[:, :-1], targets=tokens[:, 1:]).loss
            (loss / k).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        lr.step()

    step.micro = step  # type: ignore[attr-defined]
    return model, step


CLOCK = [time.perf_counter]
"""The clock of the blocks and of "own" (`--cpu`: this thread's CPU time, which a loaded
machine's other processes do not move)."""


def charlm_accum():
    """The char-LM's step as 4 micro-batches of 4 sequences (gradient accumulation: the
    noise scale's per-backward measurement runs, from the watch's second step on)."""
    model, step = charlm()
    micro = step.micro  # type: ignore[attr-defined]
    return model, lambda: micro(4)


FAULTS = {"bare": 0, "watched": 0}
"""Minor page faults in the blocks of each kind: the noise glibc's heap adds to a step
(a freed block over its mmap threshold is faulted in afresh), which the watch must not
raise."""


def block(step, steps: int, kind: str = "bare") -> float:
    """The block's mean step time."""
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    start = CLOCK[0]()
    for _ in range(steps):
        step()
    spent = (CLOCK[0]() - start) / steps
    FAULTS[kind] += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    return spent


OWN = [0.0]
DEPTH = [0]


def timed_hooks() -> None:
    """Accumulate the time spent in gradscope's hook bodies into OWN[0]."""
    from gradscope.watcher import backward_calls, measure, recorder, stepping

    def wrap(owner, name):
        original = getattr(owner, name)

        def timed(*args, **kwargs):
            start = CLOCK[0]()
            DEPTH[0] += 1
            try:
                return original(*args, **kwargs)
            finally:
                DEPTH[0] -= 1
                if DEPTH[0] == 0:  # nested calls (grads inside _begin) count once
                    OWN[0] += CLOCK[0]() - start

        setattr(owner, name, timed)

    for name in ("started", "ended"):
        wrap(backward_calls, name)
    for name in ("begin", "finish"):
        wrap(stepping, name)
    wrap(measure.Measure, "grads")  # also called by the clip wrapper
    wrap(recorder.Recorder, "flush")


PARTS: dict[str, float] = {}
"""`--parts`: gradscope's own time by part (measured steps' work), summed over the
watched blocks."""


def timed_parts() -> None:
    """Accumulate, per part of a measured step's work, its time into PARTS (nested in
    the hooks OWN times: a breakdown of "own", not an addition to it)."""
    from gradscope.watcher import adam_eps, adam_rms, updates

    def wrap(owner, name, label):
        original = getattr(owner, name)

        def timed(*args, **kwargs):
            start = CLOCK[0]()
            try:
                return original(*args, **kwargs)
            finally:
                PARTS[label] = PARTS.get(label, 0.0) + CLOCK[0]() - start

        setattr(owner, name, timed)

    wrap(updates.Updates, "before", "update, before the step (copies)")
    wrap(updates.Updates, "after", "update, after the step (derived, subtracted)")
    wrap(adam_rms.AdamRms, "observe", "Adam's state samples")
    wrap(adam_eps.AdamEps, "observe", "Adam's eps counts")


def measure(name: str, build, repeat: int, steps: int) -> None:
    from gradscope.watcher import watch

    model, step = build()
    n = sum(p.numel() for p in model.parameters())
    tensors = len(list(model.parameters()))
    block(step, 3)  # warm-up
    FAULTS.update(bare=0, watched=0)
    bare, watched, own = [], [], 0.0
    parts: dict[str, float] = {}
    for r in range(repeat):
        if r % 2:  # alternate the order so that drift on a shared machine cancels
            bare.append(block(step, steps))
        with watch(update_every=25, flush_every=10) as w:
            step()  # the first step scans for the model: outside the block
            OWN[0] = 0.0
            PARTS.clear()
            watched.append(block(step, steps, "watched"))
            own += OWN[0]
            for label, spent in PARTS.items():
                parts[label] = parts.get(label, 0.0) + spent
        assert len(w.run.steps) == steps + 1
        if r % 2 == 0:
            bare.append(block(step, steps))
    mb, mw = statistics.median(bare), statistics.median(watched)
    per_step_own = own / (len(watched) * steps)
    print(
        f"{name:6} {n / 1e6:6.2f}M params: step {mb * 1e3:7.3f} ms bare, {mw * 1e3:7.3f} ms "
        f"watched (+{(mw - mb) * 1e3:.3f}): ratio {mw / mb:.3f}; "
        f"own {per_step_own * 1e3:.3f} ms/step = "
        f"{1 + per_step_own / mb:.3f}x; memory: {tensors * 8 * 10} B pending"
    )
    per_block = {kind: n / repeat / steps for kind, n in FAULTS.items()}
    print(
        f"       page faults a step: {per_block['bare']:.0f} bare, "
        f"{per_block['watched']:.0f} watched"
    )
    for label, spent in parts.items():
        print(f"       of own: {label}: {spent / (len(watched) * steps) * 1e3:.3f} ms/step")


CASES = (
    ("tiny", tiny),
    ("plain", plain),
    ("mlp", mlp),
    ("hand", by_hand),
    ("cnn", cnn),
    ("gpt", gpt),
    ("charlm", charlm),
    ("accum", charlm_accum),
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--only", choices=[name for name, _ in CASES])
    parser.add_argument("--later", action="store_true", help="steps after the first 100")
    parser.add_argument("--cpu", action="store_true", help="thread CPU time, not wall time")
    parser.add_argument("--parts", action="store_true", help="own time by part of the update")
    parser.add_argument(
        "--steady-malloc",
        action="store_true",
        help="keep freed blocks mapped (glibc), for bare and watched alike",
    )
    args = parser.parse_args()
    if args.cpu:
        CLOCK[0] = time.thread_time
    torch.set_num_threads(args.threads)
    if args.steady_malloc and steady_malloc():
        print("glibc malloc: freed blocks stay mapped (the allocator's page faults left out)")
    timed_hooks()
    if args.parts:
        timed_parts()
    if args.later:
        from gradscope.watcher import updates

        updates.DENSE_STEPS = 0  # as after the first 100 steps: one step in 25 measured
    print(
        f"torch {torch.__version__}, {args.threads} thread(s), {args.repeat} repeats of "
        f"{args.steps} steps, interleaved; medians; "
        + ("steps after the first 100" if args.later else "early steps (every one measured)")
    )
    for name, build in CASES:
        if args.only in (None, name):
            measure(name, build, args.repeat, args.steps)


if __name__ == "__main__":
    main()
