"""Runs that are healthy without gradscope and once broke under watch: a fused optimizer
under GradScaler whose first steps overflow, an lr that is None or a tensor, a layer
added with add_param_group mid-run, a loss whose graph is a chain of many thousand
nodes. Each is watched to its end, with no internal error, and its numbers hold."""

from __future__ import annotations

import itertools
import math
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from torch import nn

import gradscope
from gradscope.watcher import discover, updates


def _watch(train, **options):
    with gradscope.watch(**options) as w:
        got = train()
    report = w.report
    assert not report.faults, report.internal_error()
    assert report.run.status == "completed"
    return report, got


# -- fused optimizers under GradScaler ------------------------------------------------------


def _fused_run(make_opt, init_scale: float, steps: int, inf_every: int = 0):
    """A float16-autocast loop under GradScaler; per step: the scale before it and the
    norm of the update it made (measured by the loop itself)."""

    def train():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
        opt = make_opt(model.parameters())
        scaler = torch.amp.GradScaler("cpu", init_scale=init_scale)
        scales, moved = [], []
        for step in range(1, steps + 1):
            x = torch.randn(4, 8)
            if inf_every and step % inf_every == 0:
                x[0, 0] = float("inf")
            with torch.autocast("cpu", dtype=torch.float16):
                loss = model(x).float().pow(2).mean()
            opt.zero_grad()
            scaler.scale(loss).backward()
            before = [p.detach().clone() for p in model.parameters()]
            scales.append(scaler.get_scale())
            scaler.step(opt)
            scaler.update()
            sq = sum(
                float((p.detach() - b).double().pow(2).sum())
                for p, b in zip(model.parameters(), before, strict=True)
            )
            moved.append(math.sqrt(sq))
        return scales, moved

    return train


def _rotated(report, r) -> bool:
    return updates.rotated(r.step, report.run.update_every)


FUSED = {
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-3, fused=True),
    "adam": lambda ps: torch.optim.Adam(ps, lr=1e-3, fused=True),
    "sgd": lambda ps: torch.optim.SGD(ps, lr=1e-2, momentum=0.9, fused=True),
}


def test_a_fused_adamw_whose_every_step_overflows_is_watched_to_its_end():
    """float16 training's usual start (the scale far too high), here for all 30 steps:
    every step skipped, none moved a weight, and no division by a step count of 0."""
    report, (_, moved) = _watch(_fused_run(FUSED["adamw"], 2.0**60, 30))
    steps = report.run.steps
    assert len(steps) == 30 and all(r.skipped for r in steps)
    assert moved == [0.0] * 30
    # a total at every step that measures each tensor (steps 1-10, 26: see updates.rotated)
    assert all(r.update_norm == 0.0 for r in steps if not _rotated(report, r))


@pytest.mark.parametrize("kind", sorted(FUSED))
def test_a_fused_optimizer_with_repeated_overflow_has_its_skips_and_updates_right(kind):
    """Overflow first (the scale falls from 2^24), then an inf batch every 4th step: the
    skipped steps are those whose scale the scaler lowered, and each update's norm is
    the one the loop measured (0 for the skipped)."""
    # fused SGD with momentum starts from a step that fits: torch 2.13's fused SGD leaves
    # its momentum buffer uninitialised when its first step is skipped, so the loop's own
    # weights would be NaN at random (a bug of torch's, not of the watch)
    init_scale = 2.0**8 if kind == "sgd" else 2.0**24
    report, (scales, moved) = _watch(_fused_run(FUSED[kind], init_scale, 16, inf_every=4))
    steps = report.run.steps
    lowered = [b < a for a, b in itertools.pairwise(scales)]
    skipped = [r.skipped for r in steps]
    assert skipped[:-1] == lowered and any(skipped) and not all(skipped)
    for r, truth in zip(steps, moved, strict=True):
        if not _rotated(report, r):  # steps 11-16 measure one tensor in 8: no total
            assert r.update_norm == pytest.approx(truth, rel=1e-4, abs=1e-12)


def test_a_skipped_fused_step_whose_state_holds_nan_moved_nothing():
    """A skipped fused step leaves the weights as they were, whatever its state holds: the
    update derived from a NaN momentum buffer is masked to 0, not multiplied by it."""

    def train():
        torch.manual_seed(0)
        model = nn.Linear(8, 4)
        opt = FUSED["sgd"](model.parameters())
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8)
        for step in range(1, 4):
            x = torch.randn(4, 8)
            if step == 3:  # an overflowing batch, over a state gone NaN
                x[0, 0] = float("inf")
                for state in opt.state.values():
                    state["momentum_buffer"].fill_(float("nan"))
            with torch.autocast("cpu", dtype=torch.float16):
                loss = model(x).float().pow(2).mean()
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        return [p.detach().clone() for p in model.parameters()]

    report, weights = _watch(train)
    assert all(torch.isfinite(w).all() for w in weights)
    assert [r.skipped for r in report.run.steps] == [False, False, True]
    assert report.run.steps[-1].update_norm == 0.0


# -- learning rates that are not a float ------------------------------------------------------


class NoneLr(torch.optim.Optimizer):
    """An optimizer whose lr is None by default and works its own out (as Adafactor)."""

    def __init__(self, params):
        super().__init__(params, {"lr": None})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-(group["lr"] or 0.01))


def _adafactor(ps):
    transformers = pytest.importorskip("transformers.optimization")
    return transformers.Adafactor(ps)  # lr=None, relative_step=True: its defaults


LRS = {
    "adafactor": (_adafactor, math.nan),
    "none": (NoneLr, math.nan),
    "tensor": (lambda ps: torch.optim.SGD(ps, lr=torch.tensor(1e-3)), 1e-3),
    "tensor-adam": (lambda ps: torch.optim.Adam(ps, lr=torch.tensor(2e-3)), 2e-3),
}


@pytest.mark.parametrize("kind", sorted(LRS))
def test_an_lr_that_is_none_or_a_tensor_is_watched(kind):
    make, lr = LRS[kind]

    def train():
        torch.manual_seed(0)
        model = nn.Linear(8, 4)
        opt = make(model.parameters())
        for _ in range(5):
            loss = model(torch.randn(16, 8)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()

    report, _ = _watch(train)
    steps = report.run.steps
    assert len(steps) == 5
    for r in steps:
        assert r.lrs[0] == pytest.approx(lr, nan_ok=True)
        assert math.isfinite(r.grad_norm) and r.grad_norm > 0


# -- add_param_group ------------------------------------------------------------------------


def test_a_layer_added_with_add_param_group_counts_in_grad_norm_from_then_on():
    """The head built and added at step 6 (never in a graph before): every step's
    grad_norm is the norm over all the optimizer's gradients, computed apart."""

    def train():
        torch.manual_seed(0)
        body = nn.Linear(8, 8)
        opt = torch.optim.SGD(body.parameters(), lr=1e-3)
        head, norms = None, []
        for step in range(1, 11):
            if step == 6:
                head = nn.Linear(8, 1)
                with torch.no_grad():
                    head.weight.mul_(30)  # its gradients dominate the norm
                opt.add_param_group({"params": head.parameters()})
            out = body(torch.randn(4, 8))
            loss = (out if head is None else head(out)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            grads = [p.grad for g in opt.param_groups for p in g["params"]]
            norms.append(float(torch.sqrt(sum(g.double().pow(2).sum() for g in grads))))
            opt.step()
        return norms

    report, norms = _watch(train)
    got = [r.grad_norm for r in report.run.steps]
    assert got == pytest.approx(norms, rel=1e-6)
    assert norms[5] > 5 * norms[4]  # the head's gradients are in it
    assert len(report.run.params) == 4 and all(p.in_optimizer for p in report.run.params)


# -- deep graphs ------------------------------------------------------------------------------


def test_the_walk_for_a_backwards_leaves_is_bounded_by_node_count():
    w = nn.Parameter(torch.ones(1))
    h = w
    for _ in range(300):
        h = h * 0.5
    assert discover.graph_leaves([h.sum()], limit=100) == []  # the leaf lies deeper
    assert discover.graph_leaves([h.sum()], limit=400) == [w]
    model = nn.Sequential(nn.Linear(2, 3), nn.Tanh(), nn.Linear(3, 1))
    found = discover.graph_leaves([model(torch.ones(1, 2)).sum()], limit=100)
    assert {id(p) for p in found} == {id(p) for p in model.parameters()}


DEEP = textwrap.dedent(
    """
    import sys, threading, torch
    import gradscope

    def train():
        torch.manual_seed(0)
        w = torch.nn.Parameter(torch.ones(1))
        opt = torch.optim.SGD([w], lr=1e-3)
        for step in range(2):
            h = w
            for _ in range(30_000):  # a recurrent loop: a chain of 30,000 nodes
                h = h * 0.9999
            loss = h.sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            print(step, loss.item(), flush=True)

    def main():
        with gradscope.watch() as watch:
            train()
        print(watch.report.run.status, len(watch.report.run.steps))

    threading.stack_size(2 << 20)  # the chain's release by recursion needs ~6 MiB here
    thread = threading.Thread(target=main)
    thread.start()
    thread.join()
    """
)


@pytest.mark.slow
def test_a_loss_whose_graph_is_a_long_chain_is_watched_without_a_crash(tmp_path):
    """A full walk of the first backward's graph left a Python object on each node, and
    the graph's release then recursed through all of them: SIGSEGV in the next forward.
    A thread with a 2 MiB stack makes 30,000 nodes enough to show it (100,000 on 8 MiB)."""
    script = tmp_path / "deep.py"
    script.write_text(DEEP)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": root}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == "completed 2"
