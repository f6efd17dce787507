"""The hook points a training-run watcher calls, and everything behind them.

`Session.start()` before the user's script runs; it waits, costing nothing,
until the script wraps a model in DistributedDataParallel or `fully_shard` and
runs it with a process group initialised. From then on:

- the first step, and the step before each gathering, are *armed*: usage
  hooks note which parameters got a gradient and why not, the optimizer-step
  pre-hook takes the gradient fingerprints (synchronised gradients, before the
  update);
- a gathering runs at the start of the forward after the first step, every
  `every` forwards after that, and in `finish()`: one all-gather of one
  float64 vector per rank (fingerprints, usage, local norms, step counts),
  issued where every rank is at the same point of the program;
- `explain(exc)` reads DDP's reduction error without any collective (the
  other ranks may be stuck): indices to names, causes, cross-rank facts from
  the store.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.optim.optimizer import (
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)

from gradscope.distributed import context, findings, fingerprint, peers, reduction, signals, usage
from gradscope.distributed.context import Rank
from gradscope.distributed.ddp_error import explained
from gradscope.distributed.discovery_hook import DiscoveryHook
from gradscope.distributed.local_fingerprints import grad_fingerprints, weight_fingerprints
from gradscope.distributed.merge import DistReport, RankRecord
from gradscope.distributed.norms import is_sharded
from gradscope.distributed.observed import Observed
from gradscope.distributed.payload import FINGERPRINTS, Gathered, GradColumn, ParamColumn, pack
from gradscope.findings import Finding
from gradscope.untraced import untraced

CAUSES = (None, *reduction.CAUSE_WORDS)  # code 0: got its gradient


@dataclass
class _Tensors:
    names: list[str]
    params: list[nn.Parameter]
    sharded: list[bool]
    buffer_names: list[str]
    buffers: list[torch.Tensor]


def _layout(model: nn.Module) -> str:
    if isinstance(model, nn.parallel.DistributedDataParallel):
        return "DDP"
    return "FSDP2" if _is_fsdp(model) else "none"


def _is_fsdp(model: nn.Module) -> bool:
    return any(c.__name__ == "FSDPModule" for c in type(model).__mro__)


class Session:
    """One distributed run, seen from one rank."""

    def __init__(self, every: int = 100, timeout_s: float = context.DEFAULT_TIMEOUT_S):
        self.every = max(1, every)
        self.timeout_s = timeout_s
        self.rank: Rank | None = None
        self.group: Rank | None = None
        """This rank in the script's process group, known from the first forward after
        the group exists, DDP or not (`rank` only once a DDP/FSDP2 model is found)."""
        self.step_counter: Callable[[], int] | None = None
        """The optimizer steps this rank took, as the watcher counts them (any wrapper,
        any optimizer, updates by hand); None: only those seen since discovery."""
        self.model: nn.Module | None = None
        self.layout = "none"
        self.tracker: usage.UsageTracker | None = None
        self.forwards = self.steps = 0
        self.armed = False
        self.grad_stash = torch.zeros(0, len(GradColumn), dtype=torch.float64)
        self.findings: dict[tuple[str, str], Finding] = {}
        self.evidence = Observed()
        self.armed_forward = 0
        """The forward whose usage and local norms the hooks hold (0: none yet)."""
        self.handles: list[Any] = []
        self.last_gathered: Gathered | None = None
        self._global = DiscoveryHook(self._discover)

        self.final_done = False
        self.before_destroy: list[Callable[[], None]] = []
        """Called before the last gathering when the script destroys its process group."""

        self._destroy = dist.destroy_process_group
        dist.destroy_process_group = self._before_destroy
        self.handles.append(register_optimizer_step_pre_hook(untraced(self._before_step)))
        self.handles.append(register_optimizer_step_post_hook(untraced(self._after_step)))

    @classmethod
    def start(cls, every: int = 100, timeout_s: float = context.DEFAULT_TIMEOUT_S) -> Session:
        return cls(every, timeout_s)

    @property
    def store(self) -> Any:
        """The process group's key-value store (None before the group exists)."""
        rank = self.rank or self.group
        return rank.store if rank is not None else None

    def optimizer_steps(self) -> int:
        """The optimizer steps this rank took (what a hang report says)."""
        if self.step_counter is not None:
            return self.step_counter()
        return self.steps

    @property
    def is_main(self) -> bool:
        """True on rank 0, and in a run that is not distributed (a group with no DDP model
        has its rank too: a rank 1 taken for rank 0 waits for crash records)."""
        rank = self.rank or self.group
        return rank.rank == 0 if rank is not None else (context.env_rank() or 0) == 0

    # discovery -------------------------------------------------------------

    def _discover(self, module: nn.Module, _args: Any) -> None:
        if self.model is not None:
            return
        if self.group is None:
            self.group = context.current(self.timeout_s)
            if self.group is None:
                return
            peers.announce(self.group.store, self.group.rank)
        if _layout(module) == "none":
            return
        self.attach(module, self.group)
        self._forward_pre(module, _args)  # hooks added now miss the call already under way

    def attach(self, model: nn.Module, rank: Rank | None = None) -> None:
        """Watch `model` (a DDP or fully_shard root); found by itself when not called."""
        self.rank = rank or context.current(self.timeout_s)
        if self.group is None and self.rank is not None:
            self.group = self.rank
            peers.announce(self.rank.store, self.rank.rank)
        self.model, self.layout = model, _layout(model)
        self._global.remove()
        inner = model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model
        ignore = frozenset(getattr(model, "parameters_to_ignore", ()) or ())
        pairs = usage.ddp_parameters(inner, ignore)
        self.t = _Tensors(
            [n for n, _ in pairs],
            [p for _, p in pairs],
            [is_sharded(p) for _, p in pairs],
            [n for n, _ in inner.named_buffers()],
            [b for _, b in inner.named_buffers()],
        )
        self.grad_stash = grad_fingerprints([None] * len(pairs))
        if self.layout == "DDP":
            self.tracker = usage.UsageTracker(inner, ignore)
        self.handles.append(model.register_forward_pre_hook(untraced(self._forward_pre)))
        self.buffer_stash = weight_fingerprints(self.t.buffers)
        self.handles.append(inner.register_forward_pre_hook(untraced(self._inner_pre)))
        self.handles.append(
            model.register_forward_hook(untraced(self._forward_post), always_call=True)
        )

    # hook points -----------------------------------------------------------

    def _forward_pre(self, _m: nn.Module, _args: Any) -> None:
        if not torch.is_grad_enabled():
            return
        if self.armed and self.tracker is not None:
            self._publish_unused()
            if self.layout == "DDP" and self.tracker.unused() and not self._finds_unused():
                return  # DDP raises right after this hook; explain() takes over
        if self.forwards == 1 or (self.forwards > 1 and self.forwards % self.every == 0):
            self.gather()
        self.forwards += 1
        self.armed = self.forwards == 1 or self.forwards % self.every == 0
        if self.armed:
            self.armed_forward = self.forwards
        if self.tracker is not None:
            self.tracker.armed = self.armed
            self.tracker.forward_started()

    def _inner_pre(self, _m: nn.Module, _args: Any) -> None:
        """Inside DDP's forward, after it broadcast rank 0's buffers: the moment buffers
        must agree across ranks."""
        if self.armed:
            self.buffer_stash = weight_fingerprints(self.t.buffers)

    def _forward_post(self, _m: nn.Module, _args: Any, _out: Any) -> None:
        if self.tracker is None:
            return
        self.tracker.forward_ended()
        if self.armed and self.rank is not None and self.rank.store is not None:
            ran = sorted(self.tracker.ran)
            self._store_set(f"gradscope/ran/{self.forwards}/{self.rank.rank}", json.dumps(ran))

    def _before_step(self, _opt: Any, _args: Any, _kwargs: Any) -> None:
        if self.model is not None and self.armed:
            self.grad_stash = grad_fingerprints(self.t.params)

    def _after_step(self, _opt: Any, _args: Any, _kwargs: Any) -> None:
        if self.model is not None:
            self.steps += 1

    def _finds_unused(self) -> bool:
        return bool(getattr(self.model, "find_unused_parameters", False))

    def _publish_unused(self) -> None:
        if self.rank is None or self.tracker is None:
            return
        unused = [u.index for u in self.tracker.unused()]
        self._store_set(f"gradscope/unused/{self.forwards}/{self.rank.rank}", json.dumps(unused))

    def _store_set(self, key: str, value: str) -> None:
        try:
            if self.rank is not None and self.rank.store is not None:
                self.rank.store.set(key, value)
        except RuntimeError:
            pass

    # gathering -------------------------------------------------------------

    def payload(self) -> torch.Tensor:
        """This rank's numbers as one float64 vector (same length on every rank)."""
        t = self.t
        n = len(t.params)
        per = torch.zeros(n, len(ParamColumn), dtype=torch.float64)
        per[:, ParamColumn.WEIGHT_SUM : ParamColumn.WEIGHT_L2 + 1] = weight_fingerprints(t.params)
        per[:, ParamColumn.GRAD_SUM] = self.grad_stash[:, GradColumn.SUM]
        per[:, ParamColumn.GRAD_L2] = self.grad_stash[:, GradColumn.L2]
        per[:, ParamColumn.GRAD_SQ] = self.grad_stash[:, GradColumn.SQ]
        if self.tracker is not None:
            per[:, ParamColumn.LOCAL_SQ] = self.tracker.local_squares()
            per[:, ParamColumn.ARRIVALS] = torch.tensor(self.tracker.arrivals, dtype=torch.float64)
            for u in self.tracker.unused():
                per[u.index, ParamColumn.CAUSE] = CAUSES.index(u.cause)
        else:
            per[:, ParamColumn.LOCAL_SQ] = math.nan
            per[:, ParamColumn.ARRIVALS] = 1.0
        return pack(self.forwards, self.steps, per, self.buffer_stash)

    def gather(self) -> None:
        """One all-gather of every rank's payload, then the cross-rank checks."""
        if self.rank is None or self.model is None:
            return
        rows = self.rank.all_gather(self.payload(), "gradscope gathering").cpu()
        gathered = Gathered.cut(rows, len(self.t.params), len(self.t.buffers))
        fresh = self.armed_forward > self.evidence.forward
        for f in self.verdicts(gathered, fresh):
            self.findings.setdefault((f.rule, f.subject), f)
        if fresh:
            self.evidence.forward = self.armed_forward
        self.last_gathered = gathered

    def verdicts(self, g: Gathered, fresh: bool = True) -> list[Finding]:
        """Findings from what every rank sent (every rank computes the same).

        Usage and local norms come from one sampled (armed) step; when `fresh` (a step
        not gathered before) they are also counted in `self.evidence`, and the findings
        that need more than one sampled step (GS501, GS502, GS506) come from there.
        """
        t, world, n = self.t, len(g.steps), len(self.t.params)
        out: list[Finding] = []
        steps = [int(s) for s in g.steps.tolist()]
        for r in signals.skipped_steps(steps):
            out.append(findings.skipped_step(r, steps))
        usage_findings = self._usage_findings(g)
        if fresh and self.tracker is not None:
            self.evidence.count(world, g.local_sq.sqrt().tolist(), usage_findings)
        out += [f for f in usage_findings if f.rule == "GS503"]
        div = fingerprint.compare(
            t.names + t.buffer_names,
            ["parameter"] * n + ["buffer"] * len(t.buffers),
            [
                [*g.params[r, :, FINGERPRINTS].tolist(), *g.buffers[r].tolist()]
                for r in range(world)
            ],
            [() if s else fingerprint.WEIGHT_FIELDS for s in t.sharded]
            + [fingerprint.BUFFER_FIELDS] * len(t.buffers),
        )
        if div is not None:
            out.append(findings.divergence(div, steps))
        return out

    def _usage_findings(self, g: Gathered) -> list[Finding]:
        if self.tracker is None:
            return []
        out = []
        arrivals = g.column(ParamColumn.ARRIVALS)
        for i, name in enumerate(self.t.names):
            got = [int(a) for a in arrivals[:, i].tolist()]
            missing = [r for r, a in enumerate(got) if a == 0]
            if any(a > 1 for a in got):
                if getattr(self.model, "static_graph", False):
                    continue  # DDP's static_graph supports a reentrant checkpoint
                out.append(findings.ready_twice(name))
            elif missing and len(missing) < len(got):
                out.append(
                    findings.rank_dependent(
                        name, _cause(g, i), tuple(missing), self._finds_unused()
                    )
                )
            elif missing:
                out.append(findings.unused_parameter(name, _cause(g, i)))
        return out

    def _before_destroy(self, group: Any = None) -> None:
        """The script tears its process group down: gather one last time while it exists.
        The one patch of `destroy_process_group` in gradscope."""
        if group is None:
            for hook in self.before_destroy:
                hook()
            self._final()
        self._destroy(group)

    def _final(self) -> None:
        if self.final_done or self.rank is None or self.model is None:
            return
        self.final_done = True
        self.grad_stash = grad_fingerprints(self.t.params)
        self.gather()

    def finish(self) -> DistReport | None:
        """The last gathering and the merged report (call on every rank, after the script
        returned; None if not distributed)."""
        try:
            self._final()
        finally:
            self.close()
        if self.rank is None or self.model is None:
            return None
        return self.report()

    def report(self, died: str | None = None) -> DistReport:
        assert self.rank is not None
        g = self.last_gathered
        records: tuple[RankRecord, ...] = ()
        if g is not None:
            records = tuple(
                RankRecord(r, int(g.forwards[r]), int(g.steps[r]), math.sqrt(g.local_sq[r]), norm)
                for r, norm in enumerate(self._grad_norms(g))
            )
        return DistReport(
            self.rank.world,
            self.rank.backend,
            self.layout,
            records,
            list(self.findings.values()) + self.evidence.findings(),
            self.rank.gatherings,
            self.rank.collectives,
            died,
        )

    def _grad_norms(self, g: Gathered) -> list[float]:
        """Each rank's total norm of the full gradients: a sharded parameter's squared
        norm is the sum of its shards' over ranks, a replicated one's is the rank's own."""
        squares = g.column(ParamColumn.GRAD_SQ).clamp(
            min=0.0
        )  # -1: no grad (NaN, a non-finite one, stays)
        sharded = torch.tensor(self.t.sharded, dtype=torch.bool)
        full = torch.where(sharded, squares.sum(0, keepdim=True), squares)
        return full.sum(1).sqrt().tolist()

    def explain(self, exc: BaseException) -> list[Finding]:
        """DDP's reduction error in names and causes; no collective (ranks may be stuck)."""
        if self.tracker is None:
            return []
        return explained(exc, self.t.names, self.tracker, self.rank, self.forwards)

    def close(self) -> None:
        """Remove every hook gradscope installed."""
        self._global.remove()

        if dist.destroy_process_group == self._before_destroy:
            dist.destroy_process_group = self._destroy
        for h in self.handles:
            h.remove()
        self.handles = []
        if self.tracker is not None:
            self.tracker.remove()


def _cause(g: Gathered, i: int) -> str | None:
    codes = [int(c) for c in g.column(ParamColumn.CAUSE)[:, i].tolist() if c > 0]
    return CAUSES[codes[0]] if codes else None
