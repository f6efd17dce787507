"""What the patches share while one run is watched (`WatchState`): each optimizer's part
in one record (optimizer_watch.py), the search for updates by hand in another
(manual_search.py). Everything in it is changed under `threads.lock` (threads.py): steps
come from any thread of the script."""

from __future__ import annotations

import time
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

from gradscope.steps.records import UnusedClip
from gradscope.taken_derivatives import TakenDerivatives
from gradscope.watcher import discover, updates
from gradscope.watcher.adam_eps import AdamEps
from gradscope.watcher.adam_rms import AdamRms
from gradscope.watcher.backward_sites import BackwardSites
from gradscope.watcher.carried_graph import GraphMarks
from gradscope.watcher.clamped_terms import ClampedTerms
from gradscope.watcher.copies_through import trained_ids
from gradscope.watcher.dropped_grads import DroppedGrads
from gradscope.watcher.eval_passes import EvalPasses
from gradscope.watcher.faults import Fault, fault_of, record
from gradscope.watcher.flat_ops import FlatOps
from gradscope.watcher.frozen_norms import FrozenNorms
from gradscope.watcher.future_attention import FutureAttention
from gradscope.watcher.grad_inputs import GradInputs
from gradscope.watcher.hand_moved import HandMoved
from gradscope.watcher.hooks_again import HooksAgain
from gradscope.watcher.logit_probe import LogitProbe
from gradscope.watcher.logit_tables import LogitTables
from gradscope.watcher.manual_search import ManualSearch
from gradscope.watcher.measure import Measure
from gradscope.watcher.mirrored import Mirrored
from gradscope.watcher.modes import Modes
from gradscope.watcher.nan_probe import NanProbe
from gradscope.watcher.noise_scale import MicroGrads
from gradscope.watcher.optim_settings import SettingsHistory
from gradscope.watcher.optimizer_watch import OpenReset, OptimizerWatch
from gradscope.watcher.plain_derivatives import PlainDerivatives
from gradscope.watcher.recorder import Recorder
from gradscope.watcher.same_batch import SameBatch
from gradscope.watcher.same_grads import SameGrads
from gradscope.watcher.sampled_grids import SampledGrids
from gradscope.watcher.target_leak import TargetLeak
from gradscope.watcher.threads import Threads, ThreadState
from gradscope.watcher.uncreated import Uncreated


class StopWatching(BaseException):
    """Raised after the last step asked for (--steps); a BaseException so that the
    script's own `except Exception` lets it through."""


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
    zeroed: weakref.WeakValueDictionary[int, Any] = field(
        default_factory=weakref.WeakValueDictionary
    )
    """id → every live optimizer whose zero_grad() ran: one that never steps still holds
    its parameters (an optimizer whose step() the script forgot). Weak: an optimizer the
    script rebuilds every epoch is not kept alive with its state."""
    idle_pending: list[int] = field(default_factory=list)
    """Ids of optimizers zeroed for the first time since the last step: if still not
    stepped at the next step of another, their models are tracked (stepping._track_idle)."""
    zero_grads: dict[int, int] = field(default_factory=dict)
    """id → how many times each of those optimizers' zero_grad() ran."""
    idle_held: dict[int, str] = field(default_factory=dict)
    """id → the class of the idle optimizer whose model was tracked at a step, for each of
    its tensors: kept after the script dropped that optimizer (a trial that raised after
    its first backward, before its first step)."""
    cleared_unstepped: set[int] = field(default_factory=set)
    """Ids of tensors whose gradient a zero_grad() of an optimizer not yet stepped cleared:
    gradients there between steps (an aux loss's backward after the main step)."""
    discovered: bool = False
    traced_clip: tuple[Any, Any, Any] | None = None
    """A clip inside a graph torch.compile traced: (total, norm_type, max_norm)."""
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
    watches: dict[int, OptimizerWatch] = field(default_factory=dict)
    """id(optimizer) → its part of the watch (`of`)."""
    manual: ManualSearch = field(default_factory=ManualSearch)
    """The search for updates by hand (manual.py changes it)."""
    nan_noted: bool = False
    optimizer_stepped: bool = False
    settings: SettingsHistory = field(default_factory=SettingsHistory)
    schedulers: dict[int, Any] = field(default_factory=dict)
    """id(scheduler) → its calls (schedules.Calls)."""
    graph_marks: GraphMarks = field(default_factory=GraphMarks)
    """Where the current step's graph begins (carried_graph.py)."""
    grad_off_at: int | None = None
    """The step whose backward failed on a loss without a graph, grad mode off."""
    grad_off_derivative: bool = False
    """That failing call was torch.autograd.grad (an evaluation's forces under no_grad)."""
    derivative_cut_at: list[int] = field(default_factory=list)
    """Steps whose loss added a constant and reached an output differentiated without
    create_graph (taken_derivatives.py): forces outside the graph."""
    graphless_at: int | None = None
    """The step whose backward failed on a loss without a graph, grad mode on."""
    first_hand_scale: float | None = None
    """The loss scale kept by hand (a power of two) at the first backward read on one
    (hand_scale.py): later losses are recorded in its scale."""
    graphless_derivative: bool = False
    """At that failure, a derivative taken without create_graph was alive, none since."""
    inputs_unreached_at: int | None = None
    """The last step in which a reentrant torch.utils.checkpoint ran with no input that
    requires grad (torch's warning: checkpoint_inputs.py)."""
    graphless_checkpoint: bool = False
    """At the graphless failure, such a checkpoint had run in the same step."""
    uncreated: Uncreated = field(default_factory=Uncreated)
    """The last torch.autograd.grad call without create_graph (uncreated.py)."""
    uncreated_at: int | None = None
    """The step whose torch.autograd.grad failed on the derivative of such a call."""
    released_by_grad: bool = False
    """A torch.autograd.grad call since the last completed backward kept no graph (neither
    retain_graph nor create_graph): it freed the graph it went through."""
    released_in_eval: bool = False
    """Such a call was made by a module in eval mode that passes create_graph itself."""
    freed_by_grad: str = ""
    """A backward then failed on a freed graph: that call is the likely cause, said here."""
    unused_clips: dict[str, UnusedClip] = field(default_factory=dict)
    """The script's line of a clip no step took → what it clipped (clipping.unused)."""
    sites: dict[str, str] = field(default_factory=dict)
    """What a rule names → the script's `file:line` of its first call (WatchRun.sites)."""
    first_weights: torch.Tensor | None = None
    """Norms of the tracked weights before the first update (device tensor)."""
    replaced: bool = False
    """A watched model registered a parameter or module since the last step (replaced.py)."""
    replaced_after: dict[int, int] = field(default_factory=dict)
    """Position → the step after which its model no longer held that tensor."""
    assigned_over: dict[int, tuple[Any, Any]] = field(default_factory=dict)
    """id(parameter) → weak references to it and to the tensor its module held under the
    same name before the assignment (`head.weight = nn.Parameter(...)`): replaced.py."""
    retiring: dict[int, tuple[int, int]] = field(default_factory=dict)
    """Position of a tensor an optimizer let go of → its gradient's id and version then
    (group_swaps.py: let go of at the next swap if no backward reached it since)."""
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
    leak: TargetLeak = field(default_factory=TargetLeak)
    future: FutureAttention = field(default_factory=FutureAttention)
    """Attention on later positions at the first steps (future_attention.py)."""
    hand_moved: HandMoved = field(default_factory=HandMoved)
    passed: dict[int, int] | None = field(default_factory=dict)
    """id(tensor) → bits of the optimizers holding tensors below its ops, at the latest read
    (passed_through.py); None once a read failed."""
    passed_known: int = 0
    """The optimizers that had stepped at that read: one more is read again."""
    same_grads: SameGrads = field(default_factory=SameGrads)
    """Fingerprints of the gradients at sampled steps: every one written over with the
    previous step's values (GS473)."""
    dropped: DroppedGrads = field(default_factory=DroppedGrads)
    """Gradients set to None by the script between a backward and the step."""
    frozen_norms: FrozenNorms = field(default_factory=FrozenNorms)
    """Frozen networks' BatchNorms, their statistics read at the first step and the end."""
    mirrored: Mirrored = field(default_factory=Mirrored)
    """Copies among an optimizer's tensors at its first step, and their gradients' cosine."""
    backward_sites: BackwardSites = field(default_factory=BackwardSites)
    logits: LogitProbe = field(default_factory=LogitProbe)
    """Attention and output logits at sampled steps (logit_probe.py)."""
    grad_inputs: GradInputs = field(default_factory=GradInputs)
    """The leaves the script differentiates against with torch.autograd.grad."""
    derivatives: TakenDerivatives = field(default_factory=TakenDerivatives)
    """The derivatives it takes with create_graph, and the leaves that only add to their outputs."""
    plain_derivatives: PlainDerivatives = field(default_factory=PlainDerivatives)
    """The leaves of outputs it differentiates without create_graph (not the variables)."""
    hooks_again: HooksAgain = field(default_factory=HooksAgain)
    """A hook of the script's registered again on a tensor that held one of its function."""
    logit_tables: LogitTables = field(default_factory=LogitTables)
    """The parameters a softmax reads as its very logits."""
    flat_ops: FlatOps = field(default_factory=FlatOps)
    """The leaves below a zero-derivative op (torch.sign, round) in the first graphs."""
    clamped_terms: ClampedTerms = field(default_factory=ClampedTerms)
    """The leaves a loss reaches only through a clamp at its bound (a KL at its free-nats
    floor) in the first graphs."""
    sampled_grids: SampledGrids = field(default_factory=SampledGrids)
    """The tensors grid_sample reads as its grid of values in the first graphs."""
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
        self.future.on_fault = lambda part, exc: self.failed(part, exc, whole=False)
        self.eval_passes = EvalPasses(
            self.tracked, lambda: self.steps, lambda: trained_ids(self.optimizers)
        )
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

    def of(self, optimizer: Any) -> OptimizerWatch:
        """The optimizer's part of the watch (made at its first use)."""
        watch = self.watches.get(id(optimizer))
        if watch is None:
            watch = self.watches[id(optimizer)] = OptimizerWatch()
        return watch

    def open_resets(self) -> list[OpenReset]:
        """The optimizers' open resets, in the order of the steps that opened them."""
        opened = [w.reset for w in self.watches.values() if w.reset is not None]
        return sorted(opened, key=lambda r: r.opened)

    def members(self, optimizer: Any) -> tuple[int, ...]:
        """Positions of the optimizer's parameters among the tracked ones (cached while
        its groups and the tracked parameters keep their sizes: a step asks every time)."""
        key = (tuple(len(g["params"]) for g in optimizer.param_groups), len(self.tracked.params))
        watch = self.of(optimizer)
        if watch.members is None or watch.members[0] != key:
            watch.members = (key, self.tracked.members(optimizer))
        return watch.members[1]

    def index_of(self, optimizer: Any) -> int:
        """The optimizer's index among those that stepped; -1: it has not stepped."""
        return next((i for i, o in enumerate(self.optimizers) if o is optimizer), -1)

    def foreign(
        self, here: ThreadState, index: int | None = None, mine: Iterable[int] = ()
    ) -> frozenset[int]:
        """Positions of the parameters another thread steps (and optimizer `index` does
        not): their gradients are not this thread's to read. Once a second thread has
        reached a hook, every position but the step's optimizer's (or `mine`, a clip's)
        is: a thread whose optimizer has not stepped yet may be in its first backward."""
        if not self.threads.alone():
            own = set(self.members(self.optimizers[index])) if index is not None else set(mine)
            return frozenset(i for i in range(len(self.tracked.params)) if i not in own)
        others = [
            i
            for i, o in enumerate(self.optimizers)
            if self.of(o).stepped_by - {here.ident} and i != index
        ]
        if not others:
            return frozenset()
        own = set(self.members(self.optimizers[index])) if index is not None else set()
        return frozenset(
            p for i in others for p in self.members(self.optimizers[i]) if p not in own
        )
