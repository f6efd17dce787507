"""Plain data of a watched run: one record per optimizer step, and the run around them.

No torch here: the rules, reporters and the JSON document read only these.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from gradscope.steps.meaning import LossKind, OptimizerSettings, SchedulerInfo
from gradscope.steps.nan_facts import BackwardNan, WeightsNan
from gradscope.steps.state_facts import StateFacts
from gradscope.steps.step_record import StepRecord
from gradscope.steps.step_store import StepStore

if TYPE_CHECKING:
    from gradscope.steps.tensor_track import TensorTrack

__all__ = ["MANUAL", "ParamInfo", "StepRecord", "WatchRun", "common_module"]

MANUAL = "manual update"
"""The name in `WatchRun.optimizers` of parameter updates made by hand (no optimizer:
`p.data.add_(p.grad, alpha=-lr)`), each judged as a step."""


@dataclass(frozen=True)
class ParamInfo:
    """A parameter gradscope tracked, and how the optimizers see it."""

    name: str
    shape: tuple[int, ...]
    requires_grad: bool
    in_optimizer: bool
    """False: it is in no param group of any optimizer, so nothing ever updates it."""
    lr: float | None
    """Learning rate of its param group at the last step (None: not in an optimizer)."""
    group: int | None = None
    """Index of its param group in the optimizer that holds it."""
    weight_norm: float | None = None
    """Its L2 norm before the first update (None: not measured)."""
    in_model: bool = True
    """False: a tensor of an optimizer's param groups that no model found holds (a
    parameter replaced after the optimizer was built, a stray tensor)."""
    replaced_after: int | None = None
    """The step after which its model no longer held it (replaced mid-run); None: never."""
    past_read_out: str | None = None
    """The layer before it (in their parent module) whose output a forward hook reads, as a
    self-supervised wrapper reads its representation: its own output may be unused by design."""
    last_norm: float | None = None
    """Its L2 norm when the run ended, read once for a parameter in no optimizer (a copy
    updates it, or nothing does); None: not read."""
    dtype: str = "float32"
    """Its dtype without the `torch.` prefix: float16 weights step in float16."""
    one_step: bool = False
    """A leaf of the first step's graph only, in no model: that step's input made to
    require grad (an embedding output under gradient checkpointing), not a weight."""
    idle_optimizer: str | None = None
    """Outside every optimizer that stepped, the class of one whose param groups hold it,
    whose zero_grad() ran and whose step() never did (or, in a run that ended early, one
    found live whose turn never came: `idle_zeroed` False); None: none."""
    idle_zeroed: bool = True
    """That optimizer's zero_grad() ran (False: one found live at the end of a run that
    ended early, never zeroed)."""
    idle_resets: int = 0
    """How many times that optimizer's zero_grad() ran: once, in a run that ended early
    (a crash, --steps), its step() may simply not have come yet."""
    idle_cleared: bool = False
    """That optimizer's zero_grad() cleared a gradient of it: a backward reached it between
    the steps the run records (an aux loss's, after the main step), not at none."""
    differentiated: bool = False
    """The script took a derivative with respect to it by torch.autograd.grad (a dummy
    scale, an input): a variable of a derivative it reads itself."""
    derivative_offset: bool = False
    """An output the script differentiated with create_graph reaches it through sums,
    gathers and reshapes only (a per-species energy shift): it adds an amount that depends
    on no input, so that derivative gives it no gradient."""
    plain_derivative: bool = False
    """It took part in an output the script differentiated by torch.autograd.grad without
    create_graph, not as a variable of that derivative (a hyper-parameter of an unrolled
    inner loss): the derivative comes back outside the graph, so a loss on it sends it
    nothing."""
    logits_table: bool = False
    """A softmax reads it as its very logits (DARTS's architecture weights): numbers in
    nats, whose initial values are no scale to judge a step against."""
    model: int | None = None
    """The index of the model found holding it (several: a GAN's generator and critic);
    None: no model holds it."""
    optimised_input: bool = False
    """Held by no layer, trained beside a network the script keeps fixed: an input it
    optimises (an image, a soft prompt, a latent), whose values are data, not weights
    initialised to a layer's scale."""
    flat_op: str | None = None
    """The op with a zero derivative (torch.sign, torch.round) it lies below in the
    graphs read: a gradient of exact zeros reaches it by torch's definition; None: none."""
    below_floor: bool = False
    """It lies below a floor on a loss term (free nats' torch.max(kl, free)) in the graphs
    read: the term's gradient reaches it only at the steps the term is above the floor."""
    clamped_off: bool = False
    """Every path from a loss read to it runs through a clamp at its bound (a KL held at its
    free-nats floor): no gradient reaches it while the term stays there, by design."""
    sampled_grid: bool = False
    """grid_sample reads it as its grid of values (a voxel grid, a feature plane): values
    the method stores and initialises itself, not weights scaled to a layer."""
    looked_up: bool = False
    """A lookup by index reads it as its table (an embedding, a hash grid's table, latent
    codes): rows at a scale the table's own initialisation chose, not a fan-in's."""
    plain_attribute: bool = False
    """A model keeps it as a plain tensor attribute, not a registered nn.Parameter:
    model.parameters() does not list it, so an optimizer built from that never holds it."""
    assigned_over: str | None = None
    """The tensor an optimizer holds that this one was assigned in place of, under the same
    name of the same module (`head.weight = nn.Parameter(emb.weight.clone())` after the
    optimizer was built: a tie undone); None: none."""
    no_grad_forwards: bool = False
    """Every forward of the module holding it, from its optimizer's first step on, ran
    under torch.no_grad() (or inference_mode): a module the script freezes by that block."""
    stepped_by_hook: bool = False
    """It has a post-accumulate-grad hook (`register_post_accumulate_grad_hook`): where each
    parameter has an optimizer of its own, the hook steps it inside the backward (torch's
    "optimizer in backward" recipe)."""
    no_grad_function: str = ""
    """The custom autograd.Function (`torch.utils.checkpoint.CheckpointFunction`, by
    module and name) inside whose forward, grad mode off, every forward of the module
    holding it ran, never again with gradients on: its backward never recomputed it."""
    rerun_by: str = ""
    """The custom autograd.Function inside whose forward the module holding it first ran,
    grad mode off, and whose backward alone ran it again with gradients on: "": none."""
    uncalled_in: str = ""
    """The installed library's class (`package.module.Class`) whose forward ran with
    gradients and never called the module holding it: a submodule the library builds and
    this configuration leaves unused; "": none."""
    dropped_in: str = ""
    """The installed library's class, outermost of those holding it (none the script's
    own), whose output its module's output never reached: an output the library drops
    (BertModel's pooler under sentence-transformers); "": none."""
    library_holder: str = ""
    """The installed library's class (torch's excepted) holding it, where its zeros come
    from a product with a constant 0 (the library's placeholder); "": any other."""
    read_as_number: str = ""
    """The installed library's class holding it whose source reads it only as a Python
    number (`.item()`): a setting it stores as a parameter, never in a graph (normflows'
    iResBlock's geom_p and lamb); "": none."""


@dataclass(frozen=True)
class WatchRun:
    """Everything recorded about one run: the rules' only input."""

    label: str
    params: tuple[ParamInfo, ...]
    steps: Sequence[StepRecord]
    """Every step, in order: a `StepStore` (given records are stored into one)."""
    status: str
    """completed | stopped (--steps reached) | crashed (the script raised) | interrupted
    (Ctrl-C) | terminated (SIGTERM)."""
    duration_s: float
    error: str | None = None
    """The script's exception in one line, when it crashed."""
    optimizers: tuple[str, ...] = ()
    """Class names of the optimizers that stepped, by index (`MANUAL` for updates made
    by hand)."""
    members: tuple[tuple[int, ...], ...] = ()
    """Per optimizer index, the positions in `params` of the parameters it steps."""
    backward_calls: int = 0
    """backward() calls seen in the whole run, with or without a step after them."""
    traceback: str | None = None
    """When it crashed: the script's traceback as Python prints it, gradscope's frames
    hidden."""
    update_every: int = 25
    """After the first 100 steps (each measured), every this many steps the update/weight
    ratios were measured (watcher/updates.py)."""
    notes: tuple[str, ...] = field(default_factory=tuple)
    loss_kinds: tuple[LossKind | None, ...] = ()
    """Per optimizer index, its loss as the graph showed it (None: never read)."""
    settings: tuple[tuple[OptimizerSettings, ...], ...] = ()
    """Per optimizer index, its hyperparameters from its first step and at each change."""
    state_loaded: tuple[tuple[int, ...], ...] = ()
    """Per optimizer index, the steps before which `load_state_dict` replaced its state
    and param groups (watcher/optim_settings.py)."""
    unwritten: tuple[str, ...] = ()
    """Files the run could not write as it ran (the --log on a full disk), one line each:
    also in `notes`; the command says them on stderr and exits 2."""

    def loss_kind(self, index: int) -> LossKind | None:
        return self.loss_kinds[index] if index < len(self.loss_kinds) else None

    def maximizes(self, index: int) -> bool:
        """The optimizer ascends its loss (maximize=True in every param group)."""
        settings = self.settings_of(index)
        return settings is not None and all(g.maximize for g in settings.groups)

    def settings_of(self, index: int) -> OptimizerSettings | None:
        """The optimizer's settings at its last step."""
        history = self.settings[index] if index < len(self.settings) else ()
        return history[-1] if history else None

    sites: dict[str, str] = field(default_factory=dict)
    """Where the script made a call a rule names, as `file:line` (the first zero_grad
    between the backward calls of a step: "wiped")."""
    schedulers: tuple[SchedulerInfo, ...] = ()
    """The lr schedulers the script stepped after their optimizer's first step."""
    backward_nan: BackwardNan | None = None
    """The backward op that made the first non-finite gradient, where watch saw it."""
    weights_nan: WeightsNan | None = None
    """Weights found non-finite after a finite loss's non-finite gradients."""
    state_facts: StateFacts = field(default_factory=StateFacts)
    """The models' modes, Adam's eps against √v̂, repeated batches (steps/state_facts.py)."""
    argv: tuple[str, ...] | None = None
    """The script's own arguments (`watch SCRIPT -- ARGS`); None when not run as a script,
    so advice can give a command line that works."""
    carried_graph: CarriedGraph | None = None
    """A backward that failed on a graph an earlier step built (watcher/carried_graph.py)."""
    growing_graph: tuple[int, tuple[str, ...]] | None = None
    """(step, buffers): buffers whose graph spans steps on a run that need not fail."""
    grad_off_at: int | None = None
    """The step whose backward failed on a loss with no graph while grad mode was off
    (torch.set_grad_enabled(False) still in force: watcher/backward_calls.py), or whose
    torch.autograd.grad call failed so (`grad_off_derivative`)."""
    derivative_cut_at: tuple[int, ...] = ()
    hook_again: HookAgain | None = None
    """A gradient hook registered on a tensor that already held one of the same function."""
    """Steps (of those whose loss was read) whose loss added a term that requires no grad
    and reached an output the script differentiated without create_graph that step."""
    derivative_moved: bool = False
    """At such a step, the derivative's input had been written in place since it was taken."""
    grad_off_derivative: bool = False
    """The failing call was torch.autograd.grad on an output with no graph: a derivative (an
    evaluation's forces -dE/dx) taken inside torch.no_grad()."""
    graphless_at: int | None = None
    """The step whose backward failed on a loss with no graph while grad mode was on (a
    value taken out of the graph on its way to the loss: watcher/backward_calls.py)."""
    graphless_derivative: bool = False
    """At that failure the results of a torch.autograd.grad call without create_graph
    were alive, with no backward since: the loss may be made from them."""
    graphless_checkpoint: bool = False
    """At that failure a reentrant torch.utils.checkpoint had run in the same step with no
    input that requires grad: its outputs come back without a graph."""
    uncreated_at: int | None = None
    """The step whose torch.autograd.grad failed on the derivative of a derivative taken
    without create_graph (watcher/uncreated.py)."""
    uncreated_direct: bool = False
    """That call's outputs were the plain derivative's results themselves (else a value
    differentiated against the same variables, likely made from them)."""
    unused_clips: tuple[UnusedClip, ...] = ()
    """Clips with a finite max_norm that no step took, per line of the script."""
    batch_read: tuple[str, ...] = ()
    """How the noise scale's micro-batches were counted in samples ("read as dim 1 of the
    input of `rnn` (LSTM, batch_first=False)"), or why not ("could not be read: ...")."""

    range_test: tuple[StepRecord, ...] = ()
    """The steps of an lr range test at the run's start, which the rules judge apart from
    `steps` (rules/range_test.py)."""

    def __post_init__(self) -> None:
        store = self.steps if isinstance(self.steps, StepStore) else StepStore.of(self.steps)
        store.widen(len(self.params))
        object.__setattr__(self, "steps", store)

    @property
    def store(self) -> StepStore:
        """`steps` as the StepStore __post_init__ made it."""
        return cast("StepStore", self.steps)

    @property
    def tensors(self) -> TensorTrack:
        """Per-tensor facts over every step (never, or no longer, got a gradient)."""
        return self.store.track

    def names(self) -> list[str]:
        return [p.name for p in self.params]

    def members_of(self, index: int) -> tuple[int, ...]:
        """Positions of optimizer `index`'s parameters; () when not recorded."""
        return self.members[index] if index < len(self.members) else ()

    def optimises_inputs(self, index: int) -> bool:
        """Every tensor optimizer `index` trains is an input optimised beside a fixed
        network (`ParamInfo.optimised_input`): an image, a prompt, a perturbation; no
        model's weights."""
        members = [i for i in self.members_of(index) if i < len(self.params)]
        return bool(members) and all(self.params[i].optimised_input for i in members)

    def optimizer_label(self, index: int) -> str:
        """ "optimizer 0 (Adam, Discriminator)": its index, class and the module its
        parameters share; "manual update" for updates made by hand."""
        kind = self.optimizers[index] if index < len(self.optimizers) else "?"
        if kind == MANUAL:
            return MANUAL
        owner = common_module(
            [self.params[i].name for i in self.members_of(index) if i < len(self.params)]
        )
        return f"optimizer {index} ({kind}{', ' + owner if owner else ''})"


@dataclass(frozen=True)
class HookAgain:
    """A gradient hook of the script's registered on a tensor that already held a live
    hook of the same function (watcher/hooks_again.py)."""

    step: int
    """The step being built when it was first seen."""
    site: str
    """The script's `file:line` of that registration."""
    hook: str
    """The hook function's name."""
    most: int
    """The most live hooks of that function seen on one tensor, the new one counted."""
    steps: tuple[int, ...]
    """The steps it was seen at (the first 8)."""


@dataclass(frozen=True)
class CarriedGraph:
    """The backward of `step` failed on a graph that reaches nodes built before the step."""

    step: int
    node: str
    """The newest of those older nodes: where the earlier graph joins ("LstmBackward0")."""
    what: str
    """"freed" (its buffers freed by the last backward) or "modified" (kept by
    retain_graph=True, its saved weights updated in place since)."""
    handed_from: int | None = None
    """The optimizer that took the previous step, where this loss's own nodes reach none of
    its tensors or reach those of an optimizer that did not step in between: the older
    graph is the part it trains, handed on within the batch."""
    shared: bool = False
    """The older part of the graph reaches only weights the optimizer that stepped since
    does not hold: it was built for this step's loss, and another optimizer's backward
    (a discriminator's, on a generator's output not detached) went through it first."""
    reads_stepper: bool = False
    """Handed on, and this loss reaches the stepped optimizer's tensors too (a world
    model's reward head scoring the actor's imagined rollout)."""
    made_from: tuple[str, ...] = ()
    """The weights the older part reaches, all stepped since and reached by none of this
    loss's own nodes: the carried tensor was made from them (a hypernetwork's generated
    weights, computed once before the loop), their only way to the loss."""
    buffers: tuple[str, ...] = ()
    """The watched models' buffers whose graph is part of the older graph: written from a
    tensor with a graph while grad mode was on (a KAN's grid or a hand-written running
    statistic updated without torch.no_grad()), they carry it into every later step."""
    states: tuple[str, ...] = ()
    """The watched modules' states (a spiking neuron's membrane kept on the module) whose
    graph reaches the older graph: carried from the previous batch, not reset."""


@dataclass(frozen=True)
class UnusedClip:
    """A line of the script whose clip_grad_norm_ (finite max_norm) no optimizer step
    took: it ran with no backward since the last step and the next backward came first."""

    site: str
    """`file:line` of the clip call."""
    max_norm: float
    count: int
    """How many times it ran so."""
    positions: tuple[int, ...]
    """The tracked parameters it touched (their positions)."""


def common_module(names: list[str]) -> str:
    """The module path every name lies under ("D" for D.0.weight, D.2.bias); "" if none."""
    if not names:
        return ""
    parts = [n.split(".")[:-1] for n in names]
    common: list[str] = []
    for level in zip(*parts, strict=False):
        if any(p != level[0] for p in level):
            break
        common.append(level[0])
    return ".".join(common)


def modules_named(names: list[str]) -> str:
    """The module every name lies under, else the top-level modules they lie in, in order
    ("RNNAgent and QMixer": a target network kept as two modules, the agent's and the
    mixer's); "" if none."""
    if common := common_module(names):
        return common
    tops = list(dict.fromkeys(n.partition(".")[0] for n in names if "." in n))
    return " and ".join([", ".join(tops[:-1]), tops[-1]]) if len(tops) > 1 else ""
