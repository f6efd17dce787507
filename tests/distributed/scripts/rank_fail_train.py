"""A training loop on 2 gloo ranks where one rank fails, waits on a child, or runs long.

    gradscope watch rank_fail_train.py --nproc-per-node 2 -- --fail raise --at 3

--wrapper ddp: the model in DistributedDataParallel; none: every rank has its own
optimizer and averages the gradients itself with `dist.all_reduce` (no DDP to find).
--fail (on --rank, after step --at): raise, exit (sys.exit(3)), kill (SIGKILL to itself),
hang (a recv from rank 0, which never sends), none. --child (rank 0, after step --at,
while the others wait in a barrier): busy (a child process that works for --child-s
seconds, computing about a quarter of the time), sleep (one that sleeps that long).
--pause S: from step --at on, every step sleeps S seconds (a long run to stop from
outside; a rank asleep when another fails). --tag WORD:
in the command line of every process the run starts (the tests look for leftovers).
"""

import argparse
import atexit
import gc
import os
import signal
import subprocess
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

CHILD = {  # busy: 0.05 s of CPU, then 0.1 s asleep (about a quarter of a CPU: the watchdog's
    # BUSY_CPU counts a tenth as working; as an evaluation tool that also waits would)
    "busy": "import time  # {tag}\nend = time.monotonic() + {s}\nx = 0\n"
    "while time.monotonic() < end:\n    burst = time.process_time() + 0.05\n"
    "    while time.process_time() < burst:\n        x = (x * 7 + 1) % 1000003\n"
    "    time.sleep(0.1)\n",
    "sleep": "import time  # {tag}\ntime.sleep({s})\n",
}


def fail(how):
    if how == "raise":
        raise RuntimeError("rank 1 lost its data shard")
    if how == "exit":
        sys.exit(3)
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if how == "hang":
        dist.recv(torch.zeros(1), src=0)


def child(kind, seconds, tag):
    """Work in a child process (an evaluation tool, a checkpoint converter) and wait."""
    subprocess.run([sys.executable, "-c", CHILD[kind].format(s=seconds, tag=tag)], check=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wrapper", default="ddp", choices=("ddp", "none"))
    ap.add_argument("--fail", default="none", choices=("none", "raise", "exit", "kill", "hang"))
    ap.add_argument("--rank", type=int, default=1)
    ap.add_argument("--child", default="none", choices=("none", *CHILD))
    ap.add_argument("--child-s", type=float, default=0.0)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--at", type=int, default=3)
    ap.add_argument("--pause", type=float, default=0.0)
    ap.add_argument("--tag", default="", help="a word in every process's command line")
    args = ap.parse_args()
    # the interpreter's last collection would walk torch's objects (about 0.55 s of CPU a
    # rank); none of this script's needs it: every file is closed, no finaliser is due
    atexit.register(gc.freeze)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    model = DDP(net) if args.wrapper == "ddp" else net
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(100 + rank)
    for step in range(1, args.steps + 1):
        x, y = torch.randn(16, 8, generator=gen), torch.randn(16, 1, generator=gen)
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        if args.wrapper == "none":
            for p in net.parameters():
                dist.all_reduce(p.grad)
                p.grad /= world
        opt.step()
        print(f"rank {rank} step {step}", flush=True)
        if step == args.at and rank == args.rank:
            fail(args.fail)
        if step == args.at and args.child != "none":
            if rank == 0:
                child(args.child, args.child_s, args.tag)
            dist.barrier()
        if step >= args.at:
            time.sleep(args.pause)
    print(f"rank {rank} done, loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
