"""What the patches share while one run is watched (`WatchState`), and the small records
it keeps between hooks. Everything in it is changed under `threads.lock` (threads.py):
steps come from any thread of the script."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch

from gradscope.watcher import discover, updates
from gradscope.watcher.adam_eps import AdamEps
from gradscope.watcher.adam_rms import AdamRms
from gradscope.watcher.eval_passes import EvalPasses
from gradscope.watcher.faults import Fault, fault_of, record
from gradscope.watcher.logit_probe import LogitProbe
from gradscope.watcher.manual_search import ManualSearch
from gradscope.watcher.measure import Measure
from gradscope.watcher.modes import Modes
from gradscope.watcher.nan_probe import NanProbe
from gradscope.watcher.noise_scale import MicroGrads
from gradscope.watcher.optim_settings import SettingsHistory
from gradscope.watcher.recorder import Recorder
from gradscope.watcher.same_batch import SameBatch
from gradscope.watcher.threads import Threads, ThreadState


class StopWatching(BaseException):
    """Raised after the last step asked for (--steps); a BaseException so that the
    script's own `except Exception` lets it through."""


@dataclass
class OpenReset:
    """Since an optimizer's last step: a reset of its gradients seen, or the norms of
    its gradients found at the start of each backward of the thread that stepped it
    (the carried-over norm of its next step: resets.py)."""

    params: list[torch.Tensor]
    thread: int
    reset: bool = False
    norms: list[torch.Tensor] = field(default_factory=list)


@dataclass
class WatchState:
    """The state the patches share while one run is watched."""

    recorder: Recorder
    update_every: int = 25
    max_steps: int | None = None
    batch_size: int | None = None
    """Samples per micro-batch, as stated (the noise scale's unit); None: seen."""
    start: float = field(default_factory=time.perf_counter)
    tracked: discover.Tracked = field(default_factory=discover.Tracked)
    optimizers: list[Any] = field(default_factory=list)
    """The optimizers that stepped, by index (a `ManualUpdates` for updates by hand)."""
    known: list[torch.optim.Optimizer] = field(default_factory=list)
    """Those and the ones found owning clipped parameters before their first step."""
    discovered: bool = False
    steps: int = 0
    backward_total: int = 0
    """backward() calls over the whole run."""
    notes: list[str] = field(default_factory=list)
    """What the watch could not do, for the report."""
    faults: list[Fault] = field(default_factory=list)
    """gradscope's own failures, each switched off where it happened (guard.py)."""
    stopped: bool = False
    """--steps reached: nothing more is recorded."""
    off: bool = False
    """Removed, or failed: every hook only calls what it wraps."""
    threads: Threads = field(default_factory=Threads)
    resets: dict[int, OpenReset] = field(default_factory=dict)
    """id(optimizer) → what happened to its gradients since its last step."""
    trained_cache: dict[int, tuple[tuple[int, ...], list[torch.Tensor]]] = field(
        default_factory=dict
    )
    members_cache: dict[int, tuple[Any, tuple[int, ...]]] = field(default_factory=dict)
    group_sizes: dict[int, tuple[int, ...]] = field(default_factory=dict)
    """id(optimizer) → its param groups' sizes at its last step (`grown`)."""
    stepped_by: dict[int, set[int]] = field(default_factory=dict)
    """Optimizer index → the threads that stepped it."""
    manual: ManualSearch = field(default_factory=ManualSearch)
    """The search for updates by hand (manual.py changes it)."""
    nan_noted: bool = False
    optimizer_stepped: bool = False
    settings: SettingsHistory = field(default_factory=SettingsHistory)
    schedulers: dict[int, Any] = field(default_factory=dict)
    """id(scheduler) → its calls (schedules.Calls)."""
    sites: dict[str, str] = field(default_factory=dict)
    """What a rule names → the script's `file:line` of its first call (WatchRun.sites)."""
    loss_kinds: dict[int, Any] = field(default_factory=dict)
    """Optimizer index → the `LossKind` of its first step whose loss was read."""
    first_weights: torch.Tensor | None = None
    """Norms of the tracked weights before the first update (device tensor)."""
    replaced: bool = False
    """A watched model registered a parameter or module since the last step (replaced.py)."""
    replaced_after: dict[int, int] = field(default_factory=dict)
    """Position → the step after which its model no longer held that tensor."""
    model_modules: tuple[int, set[int]] = (-1, set())
    """(len(tracked.roots), ids of their modules) when last read (replaced.py)."""
    probe: NanProbe = field(default_factory=NanProbe)
    """Where the first non-finite gradient of a finite loss was made (nan_probe.py)."""
    modes: Modes = field(default_factory=Modes)
    """The trained models' modes at the steps (modes.py)."""
    adam_eps: AdamEps = field(default_factory=AdamEps)
    adam_rms: AdamRms = field(default_factory=AdamRms)
    """Adam's per-tensor RMS_t and update RMS at the measured steps (adam_rms.py)."""
    batches: SameBatch = field(default_factory=SameBatch)
    logits: LogitProbe = field(default_factory=LogitProbe)
    """Attention and output logits at sampled steps (logit_probe.py)."""
    measure: Measure = field(init=False)
    updates: updates.Updates = field(init=False)
    noise: MicroGrads = field(init=False)
    """Each micro-batch's gradient norm: the noise scale's small batch."""
    eval_passes: EvalPasses = field(init=False)
    """Forwards of a trained model without gradients while in train mode."""

    def __post_init__(self) -> None:
        self.update_every = max(1, self.update_every)
        self.measure = Measure(self.tracked)
        self.updates = updates.Updates(self.measure, self.notes)
        self.noise = MicroGrads(self.tracked, self.batch_size)
        self.noise.on_fault = lambda part, exc: self.failed(part, exc, whole=False)
        self.eval_passes = EvalPasses(self.tracked, lambda: self.steps)
        self.eval_passes.on_fault = lambda part, exc: self.failed(part, exc, whole=False)

    def failed(
        self, part: str, exc: BaseException, thread: str | None = None, whole: bool = True
    ) -> None:
        """gradscope failed in `part`: the watch (or, not `whole`, only that part, which
        has switched itself off) stops; the fault goes to the report."""
        with self.threads.lock:
            if whole:
                self.off = True
            record(self, fault_of(part, self.steps + 1, exc, thread, whole))

    def members(self, optimizer: Any) -> tuple[int, ...]:
        """Positions of the optimizer's parameters among the tracked ones (cached while
        its groups and the tracked parameters keep their sizes: a step asks every time)."""
        key = (tuple(len(g["params"]) for g in optimizer.param_groups), len(self.tracked.params))
        cached = self.members_cache.get(id(optimizer))
        if cached is None or cached[0] != key:
            cached = self.members_cache[id(optimizer)] = (key, self.tracked.members(optimizer))
        return cached[1]

    def grown(self, optimizer: Any) -> bool:
        """The optimizer holds parameters it did not at its last step (add_param_group):
        asked at every step, so only its groups' sizes are compared."""
        sizes = tuple(len(g["params"]) for g in optimizer.param_groups)
        last = self.group_sizes.get(id(optimizer))
        self.group_sizes[id(optimizer)] = sizes
        return last is not None and last != sizes

    def index_of(self, optimizer: Any) -> int:
        """The optimizer's index among those that stepped; -1: it has not stepped."""
        return next((i for i, o in enumerate(self.optimizers) if o is optimizer), -1)

    def foreign(self, here: ThreadState, index: int | None = None) -> frozenset[int]:
        """Positions of the parameters another thread steps (and optimizer `index` does
        not): their gradients are not this thread's to read."""
        others = [i for i, by in self.stepped_by.items() if by - {here.ident} and i != index]
        if not others:
            return frozenset()
        own = set(self.members(self.optimizers[index])) if index is not None else set()
        return frozenset(
            p for i in others for p in self.members(self.optimizers[i]) if p not in own
        )
