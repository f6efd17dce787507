"""A backward that failed because grad mode was off (GS461): the script died with
autograd's "element 0 of tensors does not require grad and does not have a grad_fn" while
torch.is_grad_enabled() was False at the backward call: a `torch.set_grad_enabled(False)`
(an evaluation's, called as a function) never switched back, so every forward since built
no graph. Or it died so in torch.autograd.grad: a derivative (an evaluation's forces
-dE/dx) taken inside `with torch.no_grad():`, where the forward built no graph to
differentiate. The watcher reads the mode at the failure (`WatchRun.grad_off_at`). No torch."""

from __future__ import annotations

from gradscope.config import Thresholds
from gradscope.findings import Finding, Rule, Severity
from gradscope.rules.registry import DECLARED, Stage, rule
from gradscope.rules.step_common import about, inspect_command
from gradscope.steps.records import WatchRun


@rule(
    "GS461",
    "grad-mode-off",
    Severity.ERROR,
    "none-grad",
    Stage.WATCH,
    "watch: the script died in backward on a loss with no graph while grad mode was off: "
    "a torch.set_grad_enabled(False) left in force (after an evaluation) made every "
    "forward since build none; or in torch.autograd.grad, an evaluation's forces taken "
    "inside torch.no_grad()",
    example="`model.eval(); torch.set_grad_enabled(False)` before each epoch's evaluation, "
    "and only model.train() after it: the next epoch's loss.backward() fails",
    fix="run the evaluation inside `with torch.no_grad():` (or torch.inference_mode()), "
    "which restores grad mode on leaving, or call torch.set_grad_enabled(True) after it",
    objectives="any: the grad mode at a failing backward, a mechanism independent of the loss",
)
def grad_mode_off(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """The run crashed in a top-level backward whose loss requires no grad, and grad mode
    was off at that call: the forward that made the loss ran with grad mode off too (it is
    a thread's global switch), so no operation recorded a graph. A loss computed under a
    `with torch.no_grad():` block that has ended, or from detached tensors, fails the same
    way with grad mode back on: not this (the error names no switch left off). A
    torch.autograd.grad that failed so is an evaluation's derivative taken under no_grad."""
    step = run.grad_off_at
    if step is None:
        return []
    if run.grad_off_derivative:
        return [about(_in_derivative(this, step), [step])]
    finding = this.finding(
        "backward",
        f"the backward of step {step} failed on a loss with no graph, and grad mode was off "
        "at that call (torch.is_grad_enabled() False): a torch.set_grad_enabled(False) still "
        "in force, an evaluation's that was never switched back, so the forward built no "
        "graph for the loss",
        "run the evaluation inside `with torch.no_grad():` (or torch.inference_mode()), which "
        "restores grad mode when it ends, or call torch.set_grad_enabled(True) after it",
        evidence=(f"grad mode off at the backward of step {step}",),
    )
    return [about(finding, [step])]


def _in_derivative(this: Rule, step: int) -> Finding:
    return this.finding(
        "autograd.grad",
        f"torch.autograd.grad failed after {step - 1} optimizer steps on an output with no "
        "graph, and grad mode was off at that call (torch.is_grad_enabled() False): the "
        "forward ran with grad mode off (an evaluation's torch.no_grad()), and a derivative "
        "of it (forces -dE/dx) needs its graph even where nothing trains",
        "inside the evaluation, run the forward and the autograd.grad call under `with "
        "torch.enable_grad():` (create_graph=False there: the graph is freed after it)",
        evidence=(f"grad mode off at torch.autograd.grad after step {step - 1}",),
    )


@rule(
    "GS468",
    "loss-without-graph",
    Severity.ERROR,
    "none-grad",
    Stage.WATCH,
    "watch: the script died in backward on a loss with no graph while grad mode was on: "
    "a value left the graph between the model and the loss",
    example="a simulator fed `torch.tensor(controller(obs).tolist())`: the rollout's loss "
    "reaches no parameter",
    fix="keep the values tensors from the model's output to the loss (no .item(), .tolist(), "
    ".numpy() or torch.tensor() of them, no .detach(), no forward under torch.no_grad()); "
    "`gradscope inspect --script` names the op that cut the graph",
    objectives="any: a loss that requires no grad at a failing backward, grad mode on",
)
def loss_without_graph(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """The run crashed in a top-level backward whose loss requires no grad while grad mode
    was on: no tensor the loss was computed from required grad, so the values the model
    made reached it only through a cut (a Python number, a NumPy array, a tensor made anew
    from them, a .detach(), a no_grad block, ranks or indices from argsort or argmax; a
    reentrant torch.utils.checkpoint whose inputs required no grad, named when torch
    warned so in the same step). Grad mode off at the call is GS461's."""
    step = run.graphless_at
    if step is None:
        return []
    if run.graphless_checkpoint:
        return [about(_in_checkpoint(this, step), [step])]
    uncreated = (
        ", or a gradient taken just before by torch.autograd.grad without create_graph=True "
        "(a Hessian-vector product's first derivative: it comes back outside the graph)"
        if run.graphless_derivative
        else ""
    )
    finding = this.finding(
        "backward",
        f"the backward of step {step} failed on a loss with no graph although grad mode was "
        "on: nothing the loss was computed from requires grad, so the model's outputs "
        "reached it only through a cut: a Python number or NumPy array (.item(), .tolist(), "
        ".numpy()) made into a tensor again, a .detach(), a forward under torch.no_grad(), "
        "or values with no derivative (ranks or indices from argsort, argmax or topk, a "
        "comparison, a round)" + uncreated,
        "keep the values tensors from the model's output to the loss; where ranks or indices "
        "feed it, use a smooth surrogate (ApproxNDCG's sigmoid ranks, a softmax of the scores); "
        "where a step function makes them (a spiking neuron's threshold comparison), give "
        "it a surrogate gradient (snnTorch's spike_grad without surrogate_disable, an "
        "autograd.Function whose backward is a fast sigmoid's derivative)"
        + ("; take a gradient you differentiate again with create_graph=True" if uncreated else "")
        + f"; `{inspect_command(run, step)}` names the op that cut the graph and its line",
        evidence=(f"the loss requires no grad at the backward of step {step}, grad mode on",),
    )
    return [about(finding, [step])]


def _in_checkpoint(this: Rule, step: int) -> Finding:
    return this.finding(
        "checkpoint",
        f"the backward of step {step} failed on a loss with no graph although grad mode was "
        "on, and in that step torch.utils.checkpoint ran with use_reentrant=True on inputs "
        "none of which requires grad (torch warned: None of the inputs have "
        "requires_grad=True): a reentrant checkpoint returns outputs without a graph then, "
        "so the parameters inside it get no gradient (a rollout checkpointed step by step "
        "from the data loses them all)",
        "pass use_reentrant=False to torch.utils.checkpoint.checkpoint (it keeps the "
        "parameters' gradients whatever its inputs), or make the first input require grad",
        evidence=(
            f"the loss requires no grad at the backward of step {step}, grad mode on",
            f"a reentrant checkpoint with no input requiring grad in step {step}",
        ),
    )


@rule(
    "GS474",
    "graphless-derivative",
    Severity.ERROR,
    "none-grad",
    Stage.WATCH,
    "watch: the script died in torch.autograd.grad differentiating a derivative taken "
    "without create_graph=True: a Hessian-vector product, a gradient penalty or an inner "
    "step whose first gradient came back outside the graph",
    example="`g = torch.autograd.grad(loss, params)` then "
    "`torch.autograd.grad(g, params, grad_outputs=v)` (LiSSA's Hessian-vector product): the "
    "second call fails, g has no graph",
    fix="take the first derivative with `torch.autograd.grad(loss, params, "
    "create_graph=True)`: its result stays in the graph and can be differentiated again",
    objectives="any: the graph of a derivative differentiated again, independent of the loss",
)
def derivative_without_graph(
    run: WatchRun, t: Thresholds, *, this: Rule = DECLARED
) -> list[Finding]:
    """The run crashed in a torch.autograd.grad call, grad mode on, on outputs with no graph
    that were the results of the script's last torch.autograd.grad call without
    create_graph, or that it differentiated against the same variables as that call (their
    product with a vector, summed): the second derivative of a Hessian-vector product
    (influence functions' LiSSA, conjugate gradients), a gradient penalty or MAML's inner
    step, whose first derivative was taken outside the graph."""
    step = run.uncreated_at
    if step is None:
        return []
    what = (
        "the results of"
        if run.uncreated_direct
        else "a value with no graph, differentiated against the same variables as"
    )
    finding = this.finding(
        "autograd.grad",
        f"torch.autograd.grad failed after {step - 1} optimizer steps on {what} the "
        "derivative the script took just before without create_graph=True: that gradient "
        "came back outside the graph (no grad_fn), so a second derivative of it (a "
        "Hessian-vector product, a gradient penalty) has nothing to differentiate",
        "pass create_graph=True to the torch.autograd.grad call whose result is "
        "differentiated again (the Hessian-vector product's first gradient)"
        + (
            ""
            if run.uncreated_direct
            else "; if the failing value is not made from it, it left the graph on its way "
            "(.detach(), .item(), a torch.no_grad() block)"
        ),
        evidence=(f"outputs of a derivative taken without create_graph, after step {step - 1}",),
    )
    return [about(finding, [step])]
