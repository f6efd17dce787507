"""A backward that failed on a graph an earlier step built (GS459): the script died with
autograd's "backward through the graph a second time" or "modified by an inplace
operation", and the failing loss's graph reaches nodes built before its step: a tensor
carried across batches with its graph (an RNN's hidden state not detached between
truncated-BPTT batches), or a part another optimizer trains handed on with its graph
(layer-wise training without `.detach()` between blocks). The watcher reads it off the
graph at the failure (`WatchRun.carried_graph`). No torch."""

from __future__ import annotations

from gradscope.config import Thresholds
from gradscope.findings import Finding, Rule, Severity
from gradscope.fmt import listed
from gradscope.rules.registry import DECLARED, Stage, rule
from gradscope.rules.step_common import about
from gradscope.rules.step_state_reset import state_not_reset
from gradscope.steps.records import CarriedGraph, WatchRun

_WHAT = {
    "freed": "the earlier backward freed that graph's buffers",
    "modified": "retain_graph=True kept that graph, and the optimizer has since updated in "
    "place the weights it saved",
}


def _evidence(found: CarriedGraph, *more: str) -> tuple[str, ...]:
    """Where the loss joined the older graph and the step that failed, then `more`."""
    return (f"joining node: {found.node}", f"failed at step {found.step}", *more)


def _older(found: CarriedGraph) -> str:
    """How every reading of the failure begins: the step, and where its loss joined the
    older graph."""
    return (
        f"the backward of step {found.step} failed on a graph built at an earlier step: its "
        f"loss reaches autograd nodes created before the step began (joining at {found.node})"
    )


@rule(
    "GS459",
    "graph-carried-over",
    Severity.ERROR,
    "carried-graph",
    Stage.WATCH,
    "watch: the script died in backward because the loss's graph reaches nodes an earlier "
    "step built: a tensor carried between batches (an RNN's hidden state) kept its graph",
    example="truncated BPTT with `out, h = rnn(x, h)` and no `h = h.detach()` between "
    "batches; `loss.backward(retain_graph=True)` added to silence the first error, and "
    "step 2 fails with 'modified by an inplace operation'",
    fix="detach what is carried from batch to batch before the forward (h = h.detach(), or "
    "repackage_hidden for a tuple of states) and drop retain_graph=True",
    objectives="any: which step built the graph a backward reaches, independent of the loss",
)
def graph_carried_over(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """The run crashed in the backward of some step with autograd's error for a graph used
    again (freed by an earlier backward, or a saved tensor modified in place since), and
    that backward's graph reaches autograd nodes the previous step built (numbered after
    the loss before it, up to its own loss): a tensor computed at the previous step, graph
    and all, took part in this step's loss (a graph built once before the loop and reused
    by every step without failing, a view of a weight, is not the cause). Each batch's loss
    then reaches back through every earlier batch (the graph grows without end with
    retain_graph=True). Named with the newest such node, where the
    earlier graph joins this one; a failure whose graph holds only this step's nodes (an
    in-place op inside one forward) is not this. Where another optimizer took the previous
    step and this loss's own nodes reach none of its tensors, the older graph is the part
    that optimizer trains, handed on within the batch: named so (layer-wise training).
    Where that older part reaches no weight the steps in between updated, it was built for
    this loss and another optimizer's backward went through it first (a GAN's
    discriminator loss on the generator's output not detached): named as that, with its
    fix. Where that older part reaches weights the steps updated that this loss's own
    nodes reach nowhere else, the carried tensor was made from them once (weights a
    hypernetwork generated before the loop) and is their only way to the loss: it is to be
    made again in each step, as a .detach() would leave them no gradient. Where a model's
    buffer holds a node of that older graph, the buffer is the carrier: named so, with
    torch.no_grad() around the code that writes it. Where a module's state (a tensor it
    keeps between forwards outside its parameters: a spiking neuron's membrane) holds it,
    that state was not reset between batches: named so, with the reset."""
    found = run.carried_graph
    if found is None:
        return []
    if found.states:
        return [about(state_not_reset(this, found, _older(found)), [found.step])]
    if found.buffers:
        return [about(_buffer_written(this, found), [found.step])]
    if found.handed_from is not None:
        return [about(_handed_on(this, run, found, found.handed_from), [found.step])]
    if found.shared:
        return [about(_shared(this, found), [found.step])]
    if found.made_from:
        return [about(_made_once(this, found), [found.step])]
    return [about(_carried(this, found), [found.step])]


def _carried(this: Rule, found: CarriedGraph) -> Finding:
    """A tensor carried from batch to batch with its graph: an RNN's hidden state, a replay
    buffer of samples."""
    return this.finding(
        "backward",
        f"{_older(found)}: {_WHAT.get(found.what, found.what)}. A tensor carried from "
        "batch to batch kept its graph, as an RNN's hidden state does when it is not "
        "detached between truncated-BPTT batches (or a replay buffer of samples, an EBM's "
        "SGLD chains, written back with their graph): each loss would backpropagate "
        "through every earlier batch",
        "detach what is carried from batch to batch before the forward (h = h.detach(); "
        "for an LSTM's (h, c) or a list of layers, detach each: repackage_hidden; "
        "buffer[idx] = x.detach() for a replay buffer), and drop retain_graph=True, which "
        "only lets the graph grow",
        evidence=_evidence(found),
    )


def _handed_on(this: Rule, run: WatchRun, found: CarriedGraph, k: int) -> Finding:
    """The older graph is the part another optimizer trains and had just stepped: its output
    fed this loss with its graph (a block of layer-wise or forward-forward training passed
    on without .detach(), a world model's states starting an actor's imagination), not a
    tensor carried from the previous batch."""
    other = run.optimizer_label(k)
    own = (
        "This loss also reaches weights that took no step in between, another part's: "
        f"the output of {other}'s part was handed on with its graph, as when an actor's "
        "imagined rollout starts from a world model's states (or a block of layer-wise "
        "training feeds the next one) without .detach()"
        if found.reads_stepper
        else f"This loss's own part reaches none of {other}'s tensors: that part's output "
        "was handed on with its graph, as when a block of layer-wise (or forward-forward) "
        "training feeds the next one without .detach()"
    )
    return this.finding(
        "backward",
        f"{_older(found)}, the graph of the part {other} trains, which took the step "
        f"before: {_WHAT.get(found.what, found.what)}. {own}",
        "detach what one part hands to the next where each has its own loss and optimizer "
        "(h = block(h.detach()); an imagined rollout's start = states.detach()); if this "
        "loss should train the earlier part too (deep supervision), add the losses and call "
        "backward once before either optimizer steps; drop retain_graph=True",
        evidence=_evidence(found, f"previous step: {other}"),
    )


def _shared(this: Rule, found: CarriedGraph) -> Finding:
    """The older graph reaches no weight of the optimizer that stepped since: it was built
    for this loss, and another optimizer's backward freed it on the way to its own weights
    (a GAN's discriminator loss on the generator's output not detached)."""
    return this.finding(
        "backward",
        f"the backward of step {found.step} failed on a graph the previous step's backward "
        f"already went through (joining at {found.node}): "
        f"{_WHAT.get(found.what, found.what)}. That part of the graph reaches only weights "
        "the optimizer that stepped in between does not hold: it was built for this loss, and "
        "the other optimizer's loss reached it too, as a discriminator's loss does when it "
        "reads the generator's output not detached (its backward also fills the generator's "
        "gradients)",
        "detach the shared output where the other optimizer's loss reads it (D(fake.detach()) "
        "for the discriminator's step), and keep the undetached output for the loss whose "
        "weights it was built for; retain_graph=True would hide the error, not the gradients "
        "leaking into the generator",
        evidence=_evidence(found),
    )


def _made_once(this: Rule, found: CarriedGraph) -> Finding:
    """The older part is made from weights the steps updated, which this loss reaches only
    through it: a tensor computed from them once and reused (a hypernetwork's generated
    weights, a transform of a weight cached before the loop), not a state carried between
    batches; detaching it would cut those weights off the loss."""
    shown = listed(found.made_from)
    return this.finding(
        "backward",
        f"{_older(found)}: {_WHAT.get(found.what, found.what)}. That older part is made from "
        f"weights the optimizer steps ({shown}) that this step's graph reaches nowhere else: "
        "a tensor computed from them once (weights a hypernetwork generates, a transform of "
        "a weight) before the loop or at an earlier step, and used again",
        "compute that tensor again inside each step, before the forward that reads it "
        "(W = hypernet(z) in the loop), so each step's graph reaches those weights afresh; "
        "a .detach() or retain_graph=True would silence the error while those weights get "
        "no gradient, or a stale one",
        evidence=_evidence(found, f"weights reached only through it: {shown}"),
    )


def _buffer_written(this: Rule, found: CarriedGraph) -> Finding:
    """A model's buffer holds the older graph: it was written from a tensor with a graph
    while grad mode was on (a KAN layer's grid re-fitted in the forward, a running
    statistic or an EMA codebook updated by hand), and every later forward that reads it
    reaches back into the step that wrote it."""
    shown = listed(found.buffers)
    return this.finding(
        "backward",
        f"{_older(found)}: {_WHAT.get(found.what, found.what)}. The older graph is held by "
        f"the model's buffer {shown}: it was written (copy_, an in-place update or an "
        "assignment) from a tensor with a graph while grad mode was on, so every later "
        "forward that reads it reaches back into the step that wrote it",
        "write buffers under torch.no_grad() (decorate the method that updates them, as a "
        "KAN's update_grid or a hand-written running mean: @torch.no_grad()), or write a "
        ".detach()ed value; retain_graph=True would hide the error while each loss "
        "backpropagates through every earlier write",
        evidence=_evidence(found, f"buffers holding a graph: {shown}"),
    )
