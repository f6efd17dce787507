"""Why each rule fires, how to see it fire and how to fix it: the long form of RULES.

`gradscope rules GS104` prints one entry; `python -m gradscope.rule_docs` writes the
rule table and these entries into docs/rules.md (`make docs`), so the reference and the
command read the same text. Keyed by rule id, next to gradscope/findings.py's registry:
a new rule adds its entry here (a test holds the two sets equal). No torch.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from gradscope.findings import RULES, TABLE, Rule


@dataclass(frozen=True)
class RuleDoc:
    why: str
    """What is measured and against which threshold, in the words of the rule's code."""
    example: str
    """A situation that makes the rule fire."""
    fix: str
    """What to change in the model, the script or the settings."""
    command: str = ""
    """A command that makes it fire on code shipped with gradscope ("" where none does)."""
    thresholds: tuple[str, ...] = ()
    """The configuration keys that tune it (configs/default.toml)."""


STAGES = {
    "run": "gradscope inspect: one forward and backward",
    "baseline": "gradscope check --baseline: against a recorded run",
    "gradcheck": "gradscope gradcheck: a custom autograd Function",
    "watch": "gradscope watch: the steps of a training run",
    "distributed": "gradscope watch under torchrun: DDP or FSDP2 ranks",
    "diff": "gradscope diff: two models on one batch, or two runs' watch --log files",
}
"""Where a rule's findings come from, by `Rule.source`."""

_DDP = "gradscope watch gradscope/examples/ddp_train.py --nproc-per-node 2 -- "
_FN = "gradscope gradcheck gradscope.examples.functions:"
_DIFF = "gradscope diff tests/diff/diff_targets.py:gpt2_ref tests/diff/diff_targets.py:"

DOCS: dict[str, RuleDoc] = {
    "GS101": RuleDoc(
        why="After the backward a parameter with requires_grad=True still has .grad None. "
        "The finding says which of three it is: the loss itself does not require grad; the "
        "parameter's module never ran in the forward; or it ran but its output does not reach "
        "the loss, and then the explanation pass names the op that cut the graph (.detach(), "
        ".data, torch.no_grad(), a numpy round-trip) with its file and line.",
        example="an encoder whose output is .detach()ed before the decoder, or a submodule "
        "that forward never calls",
        command="gradscope inspect detached-middle",
        fix="remove the cut between the module and the loss; call a module that should run, "
        "or delete it or freeze it (requires_grad_(False)) if it is unused on purpose",
    ),
    "GS102": RuleDoc(
        why="The loss value is NaN or infinite. The explanation pass replays the forward and "
        "names the first op that made a non-finite value out of finite inputs, with its "
        "module and line.",
        example="the log of an activation that a mask set to zero",
        command="gradscope inspect nan-loss",
        fix="guard that op: clamp its input or add an epsilon (log, sqrt, division); in "
        "float16 keep the op in float32",
    ),
    "GS103": RuleDoc(
        why="A parameter's gradient holds NaN or Inf: its L2 norm is non-finite (then that "
        "tensor is measured exactly). With a finite loss the backward itself divided by zero "
        "or overflowed; the explanation pass names the op (anomaly mode's backward node).",
        example="sqrt or log at 0 in the forward, whose derivative is infinite there",
        command="gradscope inspect nan-loss",
        fix="guard the forward op whose derivative blows up (sqrt(x + eps), torch.where on the "
        "input rather than on the output); clip gradients if they merely overflow",
    ),
    "GS104": RuleDoc(
        why="Any one of three measurements: one tensor's gradient RMS per element above "
        "explode-rms (a weight feeding a BatchNorm/GroupNorm is scale-invariant and judged at "
        "unit weight RMS); a tensor that runs in the first half of the model with a gradient "
        "RMS explode-median-ratio times the median of its kind (embedding tables against "
        "tables, the rest against the rest), a norm above explode-min-norm and an RMS larger "
        "than its weights'; or the total gradient norm, what clip_grad_norm_ clips, above "
        "explode-norm. Under reduction='sum' the absolute bounds are per summed term. The "
        "explanation pass shows how activations grow layer by layer.",
        example="a deep stack of linear layers initialised with gain 2",
        command="gradscope inspect exploding-deep",
        fix="clip gradients (torch.nn.utils.clip_grad_norm_), lower the learning rate, add "
        "normalisation (LayerNorm, BatchNorm) or fix the weight init",
        thresholds=("explode-rms", "explode-median-ratio", "explode-min-norm", "explode-norm"),
    ),
    "GS105": RuleDoc(
        why="A non-zero gradient L2 norm below vanish-norm; or the gradient RMS of the first "
        "layer that ran divided by the last layer's below vanish-depth-ratio: the gradient "
        "shrinks on its way back. Layer-scale branches and biases whose gradient is zero in "
        "theory are left out. The explanation pass counts the sigmoid/tanh calls and their "
        "mean derivative.",
        example="sixteen Linear+Sigmoid layers",
        command="gradscope inspect vanishing-sigmoid",
        fix="ReLU or GELU instead of sigmoid/tanh, residual connections, normalisation, or a "
        "better init",
        thresholds=("vanish-norm", "vanish-depth-ratio"),
    ),
    "GS106": RuleDoc(
        why="A gradient exists but every element is exactly zero (max |grad| is 0). The "
        "explanation pass names a ReLU whose outputs are all zero. Zeros that a zero "
        "initialisation explains are GS108, an idle expert is GS109; a zero tensor whose own "
        "gradient is zero too, with nothing after it that a step moves (both LoRA factors "
        "zero), is reported here as stuck at zero.",
        example="a ReLU layer whose bias keeps every unit off",
        command="gradscope inspect dead-relu",
        fix="look for the dead ReLU (a large negative bias: re-initialise it, or use "
        "LeakyReLU), a multiplication by zero or a mask that is always off; for LoRA "
        "initialise A randomly and only B to zero",
    ),
    "GS107": RuleDoc(
        why="Parameters with requires_grad=False, counted per top-level module. Information "
        "only: fine-tuning freezes layers on purpose.",
        example="a frozen backbone under a trainable head",
        command="gradscope inspect frozen-layers",
        fix="nothing if it is meant; else call requires_grad_(True) on them. To make it fail "
        'a build: [tool.gradscope.severity] frozen = "error"',
    ),
    "GS108": RuleDoc(
        why="Parameters get an all-zero gradient because a tensor that multiplies the signal "
        "(a weight, gate or scale) is initialised to zero by design and its own gradient is "
        "not zero, so the first optimizer step moves it. One finding names the zero tensors "
        "instead of a GS106 for every parameter before them.",
        example="a zero-initialised classification head, a zero-init residual branch or a "
        "zero gate (nn.init.zeros_(model.head.weight))",
        fix="nothing: the zeros resolve after the first step; `gradscope inspect --script "
        "train.py --step 2` shows the gradients after it",
    ),
    "GS109": RuleDoc(
        why="A parameter of a routed expert got no gradient (None or all zero) while a "
        "sibling expert got tokens. An expert is one of two or more sibling modules with the "
        "same class and parameter shapes, next to a router: a module that ran before them and "
        "owns a parameter with one dimension per expert. Routing by design, so information, "
        "not a GS101 error.",
        example="a mixture-of-experts layer with top-2 routing on a small batch",
        fix="nothing if the experts balance out over batches; if the same experts stay idle, "
        "add a load-balancing loss or router noise, or check the router's init",
    ),
    "GS110": RuleDoc(
        why="With --baseline: a parameter's gradient norm is more than baseline-factor times, "
        "or less than 1/baseline-factor of, the norm recorded by --write-baseline (its table "
        "row is vanishing gradients when it shrank).",
        example="a change to the init or an activation after the baseline was written",
        fix="find the change since the baseline that moved this gradient; if it is meant, "
        "write the baseline again (gradscope check --write-baseline FILE)",
        thresholds=("baseline-factor",),
    ),
    "GS201": RuleDoc(
        why="The analytical gradient (backward, or jvp for forward mode) differs from central "
        "finite differences beyond |a - n| <= atol + rtol |n| (slow mode's tolerance, per "
        "dtype), on every element of a small input, else 32 exact Jacobian columns and 4 "
        "random directions; the failing pair is "
        "then measured in full and diagnosed (constant factor, sign flip, transposed, wrong "
        "order, masked elements, grad_output ignored...).",
        example="x * x whose backward forgot the factor 2",
        command=_FN + "SquareMissingFactor",
        fix="correct the backward (or jvp) named by the diagnosis; the worst elements show "
        "analytical against numerical values",
    ),
    "GS202": RuleDoc(
        why="The checked Function's forward, backward or jvp raised, or returned the wrong "
        "number or shape of gradients; the stage and the user's line are named.",
        example="a backward that indexes ctx.saved_tensors past its end",
        command=_FN + "BackwardRaises",
        fix="fix the raising code; backward returns one gradient per forward input (None for "
        "non-tensor ones), each shaped like its input",
    ),
    "GS203": RuleDoc(
        why="A caveat that can make the verdict wrong: inputs below float64 (tolerances "
        "loosened), an input or a saved tensor modified in place, an output that does not "
        "require grad, a warning raised by the forward.",
        example="a Function that saves exp(x) and then adds 1 to it in place",
        command=_FN + "ExpSavedThenModified",
        fix="check in float64; save tensors after their last change (or save a clone); mark "
        "outputs that are not differentiable with ctx.mark_non_differentiable",
    ),
    "GS301": RuleDoc(
        why="After the backward a module attribute still holds a tensor with a grad_fn, so "
        "the step's whole graph and its saved activations stay in memory, and grow if the "
        "attribute accumulates across steps.",
        example="self.last = out in forward",
        command="gradscope inspect retained-graph",
        fix="store out.detach() (or .item() for a logged number) instead of the live tensor",
    ),
    "GS401": RuleDoc(
        why="The first step whose loss is NaN/Inf, or whose gradients hold NaN/Inf elements "
        "(norms add up in float64, so an infinite norm means infinite elements); steps "
        "GradScaler skipped are AMP's (GS407). It names the first parameters that went "
        "non-finite and how many steps did.",
        example="a batch with a NaN in it, or a learning rate that overflows the weights",
        fix="`gradscope inspect --script train.py --step N -- ARGS` stops at that step's "
        "backward and names the op that made the first NaN/Inf; check that batch and the "
        "learning rate",
    ),
    "GS402": RuleDoc(
        why="A step's loss above the median of the previous spike-window steps by more than "
        "spike-sigma robust sigmas (median absolute deviation) and spike-min-ratio times that "
        "median (on a log scale for positive losses); before spike-min-history steps a spike "
        "is spike-early-ratio times the median of the steps before it. Spikes that an early "
        "blow-up explains are left to GS414.",
        example="one corrupted batch at step 150",
        command="gradscope watch gradscope/examples/train_buggy.py",
        fix="look at the batches of those steps; if the gradient norm spiked too, clip it or "
        "lower the learning rate",
        thresholds=(
            "spike-window",
            "spike-sigma",
            "spike-min-ratio",
            "spike-min-history",
            "spike-early-ratio",
        ),
    ),
    "GS403": RuleDoc(
        why="The total gradient norm (before clipping, unscaled) spikes by GS402's test "
        "(spike-window, spike-sigma, spike-min-ratio, spike-min-history, spike-early-ratio). "
        "The evidence names the layers that drove it (their norm against their "
        "own rolling median) and whether the sampled update norm spiked first, which points "
        "at the optimizer's state rather than one batch.",
        example="one corrupted batch at step 150",
        command="gradscope watch gradscope/examples/train_buggy.py",
        fix="clip the gradient norm (torch.nn.utils.clip_grad_norm_), lower the learning rate "
        "or lengthen warm-up; look at the batch of that step",
        thresholds=(
            "spike-window",
            "spike-sigma",
            "spike-min-ratio",
            "spike-min-history",
            "spike-early-ratio",
        ),
    ),
    "GS404": RuleDoc(
        why="Over the last growth-window steps (20 at least), the median gradient norm of the "
        "last quarter is growth-factor times the first quarter's, and the norm rises steadily "
        "(rank correlation with the step of 0.8 or more).",
        example="a learning rate a little too high for a model without normalisation",
        fix="lower the learning rate, clip the gradient norm or add normalisation: the trend "
        "ends in NaN",
        thresholds=("growth-window", "growth-factor"),
    ),
    "GS405": RuleDoc(
        why="A layer's median gradient norm over the last quarter of the run is below "
        "vanish-time-factor times its median over the first steps, while the loss did not "
        "fall tenfold (a converged run's gradients shrink by right).",
        example="ReLU units that die one after another under a high learning rate",
        fix="lower the learning rate, use LeakyReLU or GELU, normalisation or residual connections",
        thresholds=("vanish-time-factor",),
    ),
    "GS406": RuleDoc(
        why="After warmup-steps, clip_grad_norm_ bound on more than clip-bind-fraction of "
        "the steps. How much it bound decides: a mean clip coefficient (max_norm over the "
        "norm) below clip-coef-warn is a warning; between clip-coef-warn and clip-coef-info, "
        "or under an optimizer that divides by its gradient scale (Adam and kin), it is "
        "information; at or above clip-coef-info, nothing.",
        example="SGD with max_norm 0.1 where gradients are typically 5",
        fix="lower the learning rate or raise max_norm towards the typical norm; light "
        "clipping is fine when it is meant",
        thresholds=("clip-bind-fraction", "clip-coef-warn", "clip-coef-info", "warmup-steps"),
    ),
    "GS407": RuleDoc(
        why="After warmup-steps, GradScaler skipped more than amp-skip-rate of the steps, or "
        "amp-skip-streak steps in a row: the gradients overflow float16 at most scales.",
        example="float16 autocast on a model whose activations exceed 65504",
        fix="bf16 instead of fp16, a smaller learning rate, or the unstable op in fp32",
        thresholds=("amp-skip-rate", "amp-skip-streak", "warmup-steps"),
    ),
    "GS408": RuleDoc(
        why="GradScaler's loss scale fell below 1: the gradients are non-finite at every "
        "scale, so the scaler keeps halving it.",
        example="a NaN made in the forward under GradScaler",
        fix="find the NaN/Inf (GS401; gradscope inspect --script ... --step N) instead of "
        "letting the scaler shrink",
    ),
    "GS409": RuleDoc(
        why="A weight matrix's median update/weight norm ratio, sampled every 25 steps after "
        "warmup-steps, is above update-ratio-high; about 1e-3 is healthy. Vectors (biases, "
        "norm scales near 0) are not judged.",
        example="one param group with a learning rate 100 times the others'",
        fix="lower that param group's learning rate",
        thresholds=("update-ratio-high", "warmup-steps"),
    ),
    "GS410": RuleDoc(
        why="After warmup-steps, a parameter's median sampled update/weight ratio is below "
        "update-ratio-low: "
        "zero for any parameter, or tiny for a matrix that had gradients. Its param group's "
        "learning rate is 0, or far too small; a frozen parameter left in an optimizer is "
        "information.",
        example="a param group with lr=0, or a learning-rate schedule that decayed to 0",
        fix="give it a learning rate, or remove it from the optimizer if it is meant to stay fixed",
        thresholds=("update-ratio-low", "warmup-steps"),
    ),
    "GS411": RuleDoc(
        why="A parameter that requires grad is in no param group of any optimizer, so no step "
        "ever updates it (gradients reach it or not).",
        example="a layer added to the model after the optimizer was built",
        command="gradscope watch gradscope/examples/train_buggy.py",
        fix="build the optimizer from model.parameters() after the model is complete, or add "
        "a param group for it",
    ),
    "GS412": RuleDoc(
        why="At more than not-reset-fraction of the steps (4 at least), the previous step's "
        "gradients were still in .grad when the next backward ran. The number of backward "
        "calls per step tells a missing zero_grad from deliberate gradient accumulation that "
        "forgets to reset after its step.",
        example="a loop that calls loss.backward() and opt.step() but never opt.zero_grad()",
        fix="call optimizer.zero_grad() once per optimizer step, after step() or before the "
        "first backward",
        thresholds=("not-reset-fraction",),
    ),
    "GS413": RuleDoc(
        why="A parameter that requires grad and is in an optimizer got no gradient (None) or "
        "only zero gradients in every step of the run: it never learns.",
        example="an auxiliary head whose output is not added to the loss",
        fix="make it take part in the loss (`gradscope inspect --script train.py` shows where "
        "the graph is cut), or freeze and drop it",
    ),
    "GS414": RuleDoc(
        why="Within an optimizer's first blowup-window steps, the loss (median of 3 steps) "
        "rose to blowup-loss-ratio times where it started with the gradient norm at "
        "blowup-norm-ratio times its usual value, beyond 3 robust sigmas of the noise; or a "
        "milder rise (blowup-rise-ratio, 5 sigmas) that never came back. An error when the "
        "last steps' loss is not blowup-recover-fall below the start. One optimizer only "
        "(a GAN's losses rise by design).",
        example="a learning rate 100 times too high that a warm-up hides later",
        fix="lower the learning rate or lengthen the warm-up, so a fresh model's first "
        "updates stay small",
        thresholds=(
            "blowup-window",
            "blowup-loss-ratio",
            "blowup-norm-ratio",
            "blowup-rise-ratio",
            "blowup-recover-fall",
        ),
    ),
    "GS415": RuleDoc(
        why="With progress-min-steps steps or more, the median loss over the last steps is "
        "less than progress-min-fall below where it started (the higher of the first 5 and "
        "the first window's medians). Information when it fell less than progress-stall-fall "
        "and stayed flat over the second half. One optimizer only.",
        example="step() updating a copy of the model rather than the one the loss uses, or "
        "targets shuffled apart from their inputs",
        fix="check that step() moves the model the loss is computed on and that targets match "
        "inputs; a learning rate too high sits at chance level, one too small never moves "
        "the loss; ignore it for a loss not meant to fall",
        thresholds=("progress-min-steps", "progress-min-fall", "progress-stall-fall"),
    ),
    "GS416": RuleDoc(
        why="clip_grad_norm_ ran on gradients still multiplied by GradScaler's scale (no "
        "scaler.unscale_ before it), so max_norm is compared with norms thousands of times "
        "too large and clipping cuts every update to about max_norm/scale.",
        example="scaler.scale(loss).backward(); clip_grad_norm_(...); scaler.step(opt)",
        fix="call scaler.unscale_(optimizer) after the backward and before clip_grad_norm_, "
        "then scaler.step(optimizer)",
    ),
    "GS417": RuleDoc(
        why="A parameter that had gradients got none (None, or only zeros) from some step to "
        "the end: at least stop-min-steps steps and four times its longest gap while it was "
        "learning.",
        example="a layer frozen with requires_grad_(False) midway, or a branch the loss "
        "stopped using",
        fix="find what changed at that step: a freeze, a detach() or no_grad() around it, a "
        "branch; if the freeze is meant, take it out of the optimizer",
        thresholds=("stop-min-steps",),
    ),
    "GS430": RuleDoc(
        why="With gradient accumulation or DDP ranks, watch measures each micro-batch's "
        "gradient norm beside the step's, and from the two batch sizes the unbiased |G|² and "
        "tr(Σ) of McCandlish et al. 2018 (An Empirical Model of Large-Batch Training, "
        "appendix A.1), each smoothed over steps; their ratio B_simple estimates the critical "
        "batch size. It fires when the batch per step (micro-batch x micro-batches x ranks) is "
        "noise-scale-factor times above or below B_simple over the last 100 measured steps, "
        "beyond two standard errors. Caveats from the paper: B_simple assumes a well-"
        "conditioned Hessian and can differ from the true critical batch (B_noise) by several "
        "times; it grows as the loss falls, so early steps understate it; it is for plain SGD "
        "and carries over to Adam only approximately; and the micro-batches must be "
        "independent samples of one loss (a GAN's two losses are not, and are not measured).",
        example="accumulating 64 micro-batches per step where B_simple is a few micro-batches",
        fix="move the batch toward B_simple (fewer micro-batches or ranks above it, more below) "
        "and retune the learning rate; or take it as information: a batch above B_simple buys "
        "fewer steps with more samples, one below it the reverse",
        thresholds=("noise-scale-factor",),
    ),
    "GS501": RuleDoc(
        why="In every sampled step a DDP parameter got no gradient on any rank: its module "
        "never ran, its output is not in the loss, or the graph is cut. DDP tolerates this "
        "only with find_unused_parameters=True, at a cost every step.",
        example="a module that never runs, under find_unused_parameters=True",
        command=_DDP + "--find-unused --bug unused",
        fix="remove the module or freeze it, or put its output in the loss; then drop "
        "find_unused_parameters",
    ),
    "GS502": RuleDoc(
        why="A DDP parameter got its gradient on some ranks and not on others in every "
        "sampled step: control flow that depends on the rank or on its data.",
        example="a module that only rank 1 runs",
        command=_DDP + "--find-unused --bug rank-branch",
        fix="run the same modules on every rank (no branch on dist.get_rank() in forward)",
    ),
    "GS503": RuleDoc(
        why="A DDP parameter received its gradient twice in one backward, which DDP without "
        "static_graph rejects as marked ready twice.",
        example="one layer checkpointed twice with use_reentrant=True",
        fix="checkpoint with use_reentrant=False, or wrap with DDP(static_graph=True)",
    ),
    "GS504": RuleDoc(
        why="The script died with DDP's reduction error (Expected to have finished reduction "
        "in the prior iteration, or marked ready twice). Its parameter indices are turned "
        "into names, with the cause gradscope saw: never ran, not in the loss, cut by "
        ".detach(), used on another rank, used twice.",
        example="a module that never runs, without find_unused_parameters",
        command=_DDP + "--bug unused",
        fix="the advice for the cause: use or remove the parameter, the same control flow on "
        "every rank, or find_unused_parameters=True for a set that truly varies",
    ),
    "GS505": RuleDoc(
        why="At a gathering (the first step, every 100 forwards, the end), the fingerprints "
        "(sum and L2 norm) of replicated weights, gradients or buffers differ between ranks; "
        "the first such tensor is named.",
        example="rank 1 nudges one weight element after step 3",
        command=_DDP + "--bug perturb",
        fix="keep replicas bitwise equal: the same seed (or broadcast rank 0's state), no "
        "rank-local weight or buffer updates, SyncBatchNorm or broadcast_buffers=True",
    ),
    "GS506": RuleDoc(
        why="A rank's local gradient norm before the all-reduce is non-finite, or more than 10 "
        "times the median of the other ranks', in two sampled steps (or the only one).",
        example="rank 1's data shard has its targets in other units, x100",
        command=_DDP + "--bug bad-shard",
        fix="check that rank's data shard (corrupt, mislabelled or scaled samples) and any "
        "code that runs on that rank only",
    ),
    "GS507": RuleDoc(
        why="A rank took fewer optimizer steps than the others (counted at each gathering).",
        example="rank 1 skips its third optimizer step",
        command=_DDP + "--bug skip",
        fix="step every rank together: no rank-local continue, NaN check or GradScaler state "
        "that differs",
    ),
    "GS601": RuleDoc(
        why="Walking the module calls in execution order, the first whose output differs "
        "from the reference's beyond the dtype's tolerance while its inputs agree: the "
        "difference starts inside that module's forward (the first differing submodule input "
        "narrows it further).",
        example="a GPT-2 port whose block 1 forgets a residual",
        command=_DIFF + "gpt2_port_residual",
        fix="compare that module's forward line by line with the reference's: eps, "
        "activation variant, weight layout, scaling, residuals, dropout, dtypes",
    ),
    "GS602": RuleDoc(
        why="Every module output agrees within tolerance but a parameter's gradient differs: "
        "a backward differs.",
        example="a custom autograd Function, a detach, a hook or a straight-through trick in "
        "one model; or a setting (--b-autocast bf16) that changes a gradient",
        fix="check the backward of the module that owns the gradient; under a setting, keep "
        "that module in float32 or loosen --rtol knowingly",
    ),
    "GS603": RuleDoc(
        why="A module's output changes with the seed (each model's forward is repeated with "
        "another seed): randomness such as dropout is active there, so the comparison is "
        "noise.",
        example="attention dropout with training=True in the port",
        command=_DIFF + "gpt2_port_dropout",
        fix="compare in eval mode (model.eval()), or find the functional dropout with "
        "training=True",
    ),
    "GS604": RuleDoc(
        why="A weight pairs with the other model's only with its shape reversed; it is not "
        "copied unless --allow-transposed.",
        example="GPT-2's Conv1D (in, out) weights against nn.Linear (out, in)",
        fix="transpose it when loading it into the port",
    ),
    "GS605": RuleDoc(
        why="Two parameters share a name but their shapes are incompatible, so the weight is "
        "not copied.",
        example="a port built with another hidden size or vocabulary",
        fix="build the port with the reference's dimensions (hidden size, heads, vocabulary)",
    ),
    "GS606": RuleDoc(
        why="Parameters with no counterpart in the other model after pairing by name (wrapper "
        "prefixes such as module. and _orig_mod. are found by themselves).",
        example="a port that names its layers blocks.N where the reference says h.N",
        fix='pair renamed parameters with --name-map FILE ("ref_name" = "new_name"; a key '
        "ending in '.' renames a prefix)",
    ),
    "GS607": RuleDoc(
        why="Two watch --log runs, steps paired by number: the first step where the loss, the "
        "total gradient norm or a parameter's gradient norm differs from the reference's "
        "beyond |a-b| <= atol + rtol*|a| (rtol by dtype: 1e-4 float32, 1.6e-1 bfloat16; "
        "bitwise with --exact). The parameters that part first are ranked, and the gap's "
        "growth after it is measured.",
        example="the same script run with another learning rate from step 20, another seed, "
        "another data order or a frozen layer",
        fix="compare what the two runs did differently before that step; for runs meant to "
        "be identical, a non-deterministic kernel: torch.use_deterministic_algorithms(True)",
    ),
    "GS608": RuleDoc(
        why="Each run judged by itself, whatever the comparison says: its weights never moved "
        "(update norm 0 at every sampled step, or a learning rate of 0 throughout), or its "
        "median loss over the last steps is less than 5% below where it started (judged from "
        "20 logged losses, and not with several optimizers). An error when the weights never "
        "moved; a warning when they moved and the loss stayed (a converged checkpoint "
        "fine-tuned further).",
        example="a run with lr=0 that matches, within a loose tolerance, a reference whose "
        "loss barely moves",
        fix="check the learning rate and that step() updates the model the loss is computed "
        'on; a loss not meant to fall (a converged checkpoint): ignore = ["GS608:*"]',
    ),
    "GS609": RuleDoc(
        why="Steps or parameters only one of the two runs logged: runs of different lengths "
        "(the common steps are compared), other logging intervals, names that do not pair.",
        example="a run stopped at step 40 against one of 60 steps",
        fix='nothing for lengths; pair renamed parameters with --name-map FILE ("ref_name" = '
        '"new_name")',
    ),
}


def doc_of(rule: Rule) -> RuleDoc | None:
    return DOCS.get(rule.id)


# --- docs/rules.md --------------------------------------------------------------------------

BEGIN = "<!-- generated by `make docs` (python -m gradscope.rule_docs): do not edit -->"
END = "<!-- end of generated rules -->"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown() -> str:
    """The rule table and one section per rule, from RULES, TABLE and DOCS."""
    rules = sorted(RULES.values(), key=lambda r: r.id)
    lines = [
        "| rule | slug | severity | stage | what it finds | table row |",
        "|---|---|---|---|---|---|",
    ]
    for r in rules:
        row = TABLE[r.row]
        lines.append(
            f"| [{r.id}](#{r.id.lower()}-{r.slug}) | {r.slug} | {r.severity} | {r.source} "
            f"| {_cell(r.summary)} | {_cell(row.symptom)} |"
        )
    for r in rules:
        lines += ["", f"### {r.id} {r.slug}", "", *_section(r)]
    return "\n".join(lines) + "\n"


def _section(r: Rule) -> list[str]:
    row, doc = TABLE[r.row], doc_of(r)
    out = [
        f"{r.severity} by default · {STAGES.get(r.source, r.source)} · {r.summary}.",
        "",
        f"Troubleshooting row: **{row.symptom}**; cause: {row.cause}; remedy: {row.remedy}.",
    ]
    if doc is None:
        return out
    out += ["", f"**Why it fires.** {doc.why}"]
    if doc.thresholds:
        out[-1] += " Tuned by " + ", ".join(f"`{k}`" for k in doc.thresholds) + "."
    out += ["", f"**Example.** {_sentence(doc.example)}"]
    if doc.command:
        out += ["", "```", doc.command, "```"]
    out += ["", f"**Fix.** {_sentence(doc.fix)}"]
    return out


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + ("" if text.endswith((".", ")")) else ".")


def splice(page: str, generated: str) -> str:
    """`page` with the text between BEGIN and END replaced by `generated`."""
    pattern = re.compile(re.escape(BEGIN) + r"\n.*?" + re.escape(END), re.S)
    if not pattern.search(page):
        raise ValueError(f"no generated block ({BEGIN} ... {END}) in the page")
    return pattern.sub(lambda _: f"{BEGIN}\n{generated}{END}", page, count=1)


def main(argv: list[str]) -> int:
    """python -m gradscope.rule_docs [docs/rules.md]: rewrite the page's generated block."""
    path = Path(argv[0] if argv else "docs/rules.md")
    page = path.read_text(encoding="utf-8")
    new = splice(page, markdown())
    if new != page:
        path.write_text(new, encoding="utf-8")
        print(f"{path}: rule table regenerated ({len(RULES)} rules)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
