"""GS413 and GS101 told apart: a parameter whose module ran its forward inside
torch.no_grad(). The block freezes it on purpose (fairseq's feature encoder under
feature_grad_mult=0, an encoder held for its first freeze_finetune_updates): it gets no
gradient by design, and an optimizer skips a parameter whose .grad is None, so keeping it
in one changes nothing. Information that names the block; a no_grad region after the
module, between its output and the loss, is a cut and stays one. A copy of a model that
learns (a teacher run under no_grad whose EMA update was forgotten, a greedy-rollout
baseline handed to the optimizer) stays a warning that names the copy: what moves a copy
is a copy into it, not a gradient. No torch."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from gradscope.findings import Finding, Severity
from gradscope.steps.records import ParamInfo, WatchRun

NO_GRAD_REGION = "a torch.no_grad() (or inference_mode) region: "
"""How the explanation pass (inspector/explain_cuts.py) names a cut made by grad mode off,
followed by the op's site: "`conv1d` at file:line in `module`"."""


def as_information(finding: Finding, p: ParamInfo) -> Finding:
    """GS413 as information on a parameter frozen by the no_grad block around its module."""
    return replace(
        finding,
        severity=Severity.INFO,
        message=f"{finding.message}; its module ran every forward inside torch.no_grad() "
        "(or inference_mode): frozen by that block, and the optimizer skips it while its "
        ".grad is None",
        advice="fine if it is meant to stay frozen: call requires_grad_(False) on it and "
        "leave it out of the optimizer to say so; if it should learn, run its forward with "
        "gradients on (a freeze_finetune_updates or feature_grad_mult=0 setting holds it)",
    )


REENTRANT_CHECKPOINT = "torch.utils.checkpoint.CheckpointFunction"
REENTRANT_ADVICE = (
    "pass use_reentrant=False to checkpoint() (or checkpoint_sequential()), which gives the "
    "parameters inside their gradients whatever the inputs; or keep the first layer outside "
    "the checkpointed region so that its input requires grad"
)


def as_never_recomputed(finding: Finding, p: ParamInfo) -> Finding:
    """GS413 on a parameter whose module ran only inside a custom Function's forward, where
    grad mode is off, and was never run again with gradients on: the Function's backward
    did not recompute it. A warning (nothing froze it on purpose) that names the Function."""
    name = p.no_grad_function.rpartition(".")[2]
    if p.no_grad_function == REENTRANT_CHECKPOINT:
        why = (
            "its module ran every forward inside torch.utils.checkpoint with "
            "use_reentrant=True, which runs it under no_grad and again in the backward "
            "only when an input of the checkpoint requires grad: none did (the raw batch, "
            "or a first layer's input), so its output carried no graph"
        )
        advice = REENTRANT_ADVICE
    else:
        why = (
            f"its module ran every forward inside the custom autograd.Function {name}'s "
            "forward, where grad mode is off, and never again with gradients on: "
            f"{name}.backward did not recompute it"
        )
        advice = (
            f"in {name}.backward, rerun the module under torch.enable_grad() and "
            "backpropagate into its parameters (torch.autograd.backward of its outputs, as "
            f"reversible blocks do), or pass its parameters to {name}.apply so that its "
            "output requires grad and autograd calls the backward"
        )
    return replace(finding, message=f"{finding.message}; {why}", advice=advice)


def as_told(
    run: WatchRun, i: int, finding: Finding, learned: Callable[[WatchRun, int], bool]
) -> Finding:
    """GS413 on a parameter whose module ran every forward under no_grad: information where
    the block freezes it on purpose; where it is a copy of a model that learns, a warning
    that names the copy and says what moves one (a copy into it), not a graph cut."""
    original = mirrored_learner(run, i, learned)
    if not original:
        return as_information(finding, run.params[i])
    return replace(
        finding,
        message=f"{finding.message}; it is a copy of {original} (it started equal), its "
        "module ran every forward inside torch.no_grad(), and nothing changed its values: "
        "the optimizer skips it while its .grad is None, so only a copy into it (an EMA "
        "step, load_state_dict) moves it, and none came",
        advice=f"if it should follow {original} (an EMA teacher, a target network), check "
        "that its update runs; one replaced only when a test passes (a greedy-rollout "
        "baseline, refreshed when the policy beats it) may not have been in this run; "
        "either way no gradient reaches it: leave it out of the optimizer and call "
        "requires_grad_(False) on it",
    )


def mirrored_learner(run: WatchRun, i: int, learned: Callable[[WatchRun, int], bool]) -> str:
    """The tensor of parameter i's name and shape below another module that it started
    equal to and that got gradients: the original of a copy of a trained model (a Mean
    Teacher whose EMA update is missing never moves), not a block frozen on purpose; ""
    when there is none."""
    p = run.params[i]
    below = p.name.partition(".")[2]
    if not below:
        return ""
    return next(
        (
            q.name
            for j, q in enumerate(run.params)
            if j != i
            and q.shape == p.shape
            and q.name.partition(".")[2] == below
            and q.weight_norm == p.weight_norm
            and learned(run, j)
        ),
        "",
    )


def read_inside(subject: str, cuts: list[str]) -> bool:
    """Every cut the explanation pass found for parameter `subject` is a no_grad region at
    an op of its own module or of one holding it: the module's forward ran inside the block
    (evidence lines "graph cut by <site>; <site>")."""
    module = subject.rpartition(".")[0]
    sites = [s for e in cuts for s in e.removeprefix("graph cut by ").split("; ")]
    if not sites or not all(s.startswith(NO_GRAD_REGION) for s in sites):
        return False
    holders = [s.rpartition(" in `")[2].rstrip("`") if " in `" in s else "" for s in sites]
    return all(not h or module == h or module.startswith(h + ".") for h in holders)


def as_inspected(finding: Finding) -> Finding:
    """GS101 as information on a parameter read inside a no_grad block."""
    return replace(
        finding,
        severity=Severity.INFO,
        message=f"{finding.message.split(': ', 1)[0]}: it is read inside torch.no_grad() (or "
        "inference_mode), in its module's forward: frozen by that block",
        advice="fine if it is meant to stay frozen: call requires_grad_(False) on it to say "
        "so; if it should learn, run its forward with gradients on (a freeze_finetune_updates "
        "or feature_grad_mult=0 setting holds it)",
    )
