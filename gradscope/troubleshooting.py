"""The troubleshooting TABLE every finding's advice rests on (DESIGN.md's table): a row per
kind of problem, its symptom, likely cause and remedy, by key. Plain data; no torch, nothing
of gradscope imported."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TableRow:
    """One row of the troubleshooting table in DESIGN.md."""

    key: str
    symptom: str
    cause: str
    remedy: str


TABLE = {
    row.key: row
    for row in (
        TableRow(
            "none-grad",
            "grad is None",
            "requires_grad not set / tensor not in the graph",
            "check every tensor that takes part in the computation",
        ),
        TableRow(
            "exploding",
            "exploding gradients",
            "learning rate too high / network too deep",
            "gradient clipping / normalization",
        ),
        TableRow(
            "vanishing",
            "vanishing gradients",
            "saturating activations",
            "ReLU / LeakyReLU (and residuals, normalization)",
        ),
        TableRow(
            "oom",
            "out of memory",
            "graph not released",
            "no_grad / detach (and .item() for logged losses, checkpointing)",
        ),
        # the tutorial's table of gradient-checking techniques (2.3): gradcheck row
        TableRow(
            "gradcheck",
            "custom Function's gradient is wrong",
            "backward does not compute the derivative of forward",
            "verify it with torch.autograd.gradcheck (gradscope gradcheck)",
        ),
        TableRow(
            "non-finite",
            "NaN or Inf in the loss or gradients",
            "an op outside its domain (log/sqrt/div of zero or a negative) or an overflow",
            "guard the op (clamp, epsilon), or clip / lower the learning rate if values overflow",
        ),
        TableRow(
            "domain",
            "NaN or Inf in the loss or gradients",
            "an op applied outside its domain (log or sqrt of zero or a negative, 0/0)",
            "clamp the input or add an epsilon before the op",
        ),
        TableRow(
            "zero-init",
            "gradients exactly zero at initialisation",
            "a deliberate zero initialisation (zero head, zero-init residual, zero gate)",
            "none: the zeros resolve after the first optimizer step",
        ),
        # distributed runs (DDP, FSDP2): the rows the tutorial's table lacks
        TableRow(
            "ddp-usage",
            "DDP error: parameters without grad or marked ready twice",
            "a parameter is not used in the loss on every rank, or used in two backward passes",
            "use every parameter on every rank, or tell DDP (freeze, static_graph, use_reentrant)",
        ),
        TableRow(
            "replicas",
            "replicas disagree or one rank misbehaves",
            "ranks diverged (seed, data, a rank-local update or skipped step)",
            "same init and step on every rank; compare the per-rank numbers",
        ),
        # `gradscope watch`: verdicts over the steps of a training run (GS4xx)
        TableRow(
            "spike",
            "loss or gradient norm spikes mid-training",
            "a bad batch, learning rate too high, or the optimizer's state (Adam's second "
            "moment) decayed while gradients were small",
            "gradient clipping, lower learning rate or longer warm-up, inspect the batch",
        ),
        TableRow(
            "precursor",
            "a run that diverges after a quiet start",
            "a learning rate that jumped or ramped, Adam's second moment lagging a sudden "
            "large gradient, attention or output logits that grew for hundreds of steps",
            "the mechanism's fix: a lower peak or a longer warm-up, beta2 or eps, "
            "qk-layernorm, a z-loss",
        ),
        TableRow(
            "clipping",
            "gradient clipping binds on most steps",
            "learning rate or loss scale too high: clipping acts as the learning rate",
            "lower the learning rate, raise max_norm, or accept it knowingly",
        ),
        TableRow(
            "amp",
            "fp16 steps skipped / loss scale collapses",
            "gradients overflow half precision (or are NaN) at most scales",
            "bf16, a smaller learning rate, fp32 for the unstable op, fix the NaN",
        ),
        TableRow(
            "update-ratio",
            "a layer learns far too fast or not at all",
            "learning rate wrong for that layer (0 or too high), frozen, or not in the optimizer",
            "per-group learning rates; put every trainable parameter in a param group",
        ),
        TableRow(
            "not-reset",
            "gradients keep growing step after step",
            "optimizer.zero_grad() missing, so .grad accumulates across steps",
            "call optimizer.zero_grad() once per optimizer step",
        ),
        TableRow(
            "progress",
            "the loss blew up in the first steps, or ends no better than it started",
            "learning rate too high for the start (too short a warm-up): the first updates "
            "wreck the initialisation; or the updates do not reach the loss",
            "lower the learning rate or lengthen warm-up; check that step() moves the "
            "model the loss is computed on",
        ),
        TableRow(
            "objective",
            "the loss falls below its bound, or rises while the optimizer succeeds",
            "the loss is negated (or the optimizer has maximize=True): the run ascends",
            "minimise the loss itself; keep a deliberate ascent explicit (maximize=True)",
        ),
        TableRow(
            "logits",
            "the loss stalls above 0, or learns slowly, with a softmax or sigmoid before it",
            "the loss applies its own log_softmax or sigmoid: probabilities are squashed "
            "twice (or normalised over the wrong axis)",
            "pass the raw logits to the loss; log_softmax over the classes is right as it is",
        ),
        TableRow(
            "decay",
            "weights shrink towards 0; the loss stalls at chance",
            "weight decay (lr × weight_decay) too strong for the optimizer's steps",
            "a smaller weight_decay; no decay on biases and norm scales",
        ),
        TableRow(
            "unbounded",
            "the loss falls ever faster while its gradient grows",
            "a term of the objective falls without bound: most often a KL, an entropy or a "
            "log-determinant with its sign flipped",
            "check each term's sign (a negative ELBO adds the KL); bound a term meant to grow",
        ),
        TableRow(
            "after-clip",
            "updates larger than the clipped gradients allow",
            "the gradients were changed between the clip and step(): noise or surgery added "
            "after the clip, which it does not bound",
            "change the gradients before clipping",
        ),
        TableRow(
            "hook-again",
            "gradients other than the loss's own, by a factor or an equation solved twice",
            "a gradient hook registered again on a tensor that kept the last one: each "
            "backward passes the gradient through every registration",
            "register the hook once, or keep its handle and remove() it before registering again",
        ),
        TableRow(
            "carried-graph",
            "backward fails from the second step on: the graph was freed, or a variable it "
            "needs was modified by an inplace operation",
            "a tensor carried from batch to batch (an RNN's hidden state) keeps the earlier "
            "batch's graph",
            "detach what is carried between batches; retain_graph=True only hides it",
        ),
        TableRow(
            "lr-drift",
            "a learning rate that wanders far from anything the script set",
            "the learning rate rescaled in place every step (param_groups' lr times a "
            "per-batch factor) and never restored: the factors compound",
            "restore the lr after the step, or compute it from its base value each step",
        ),
        TableRow(
            "clip-order",
            "gradient clipping that never bounds a step",
            "clip_grad_norm_ ran where no step applies what it clipped: before backward() (on "
            "the previous step's gradients) or after step()",
            "clip after backward() and before step()",
        ),
        TableRow(
            "reset-order",
            "the optimizer steps but applies no gradient",
            "zero_grad() between backward() and step() clears the gradients it needs",
            "zero_grad() before backward() or after step()",
        ),
        TableRow(
            "wiped",
            "gradient accumulation that does not accumulate; the first step's loss unlike "
            "the later ones",
            "zero_grad() (or .grad = None) between the backward calls of one step: only "
            "the last micro-batch reaches the update",
            "reset the gradients once per step: before the accumulation loop or after step()",
        ),
        TableRow(
            "schedule",
            "the learning rate near 0 long before the training ends; the loss stalls high",
            "a scheduler whose schedule counts epochs stepped per batch (or per micro-batch)",
            "scheduler.step() once per epoch, or a schedule sized in optimizer steps",
        ),
        TableRow(
            "schedule-stalled",
            "the learning rate stays near where its schedule starts (OneCycleLR's warm-up "
            "value, a cosine at its peak) through the whole run",
            "a scheduler sized in optimizer steps stepped once per epoch",
            "scheduler.step() after every optimizer.step(), or a schedule sized in epochs",
        ),
        TableRow(
            "stale-params",
            "gradients flow but the weights never move; parameters in no optimizer",
            "a parameter or module replaced after the optimizer was built: it steps the old "
            "tensors",
            "build the optimizer after the model is final (or add_param_group the new ones)",
        ),
        TableRow(
            "shared-params",
            "a model is moved by another model's optimizer too",
            "a tensor in the param groups of two optimizers that both step it (a GAN's "
            "discriminator optimizer built over the generator's parameters too)",
            "give each optimizer only its own model's parameters; detach what one model "
            "hands the other where the other's loss should not reach it",
        ),
        TableRow(
            "reduction",
            "SGD's steps far too large or too small for its learning rate",
            "the loss's reduction scales the gradient: a sum over the batch (× B), a loss "
            "divided twice under accumulation (÷ K)",
            "a mean reduction, the loss divided once by the accumulation steps",
        ),
        TableRow(
            "train-mode",
            "training moves but evaluation disagrees, or dropout and BatchNorm do nothing",
            "model.eval() left on during the optimizer steps, or BatchNorm statistics "
            "that never moved from their initial 0 and 1",
            "model.train() before the training steps; load or learn the statistics a "
            "frozen BatchNorm normalises with",
        ),
        TableRow(
            "eval-mode",
            "an evaluation metric noisier or worse than the training loss suggests; the "
            "model evaluates differently after each evaluation",
            "an evaluation under torch.no_grad() with the model still in train mode: its "
            "dropouts drop, its BatchNorms fold the evaluation data into their statistics",
            "model.eval() before the evaluation, model.train() after it",
        ),
        TableRow(
            "frozen-stats",
            "a fixed feature network (a perceptual loss, a teacher, a frozen backbone) "
            "gives other features as training goes on",
            "the network was frozen with requires_grad_(False) but left in train mode: its "
            "BatchNorms refold every batch into their running statistics",
            "call .eval() on the frozen network after every model.train() (or override "
            "train() to keep it in eval)",
        ),
        TableRow(
            "adam-eps",
            "Adam learns as slowly as SGD with a tiny step",
            "eps above √v̂ for most elements: the step is lr·m̂/eps",
            "eps far below the gradients' size (1e-8), or gradients not scaled down",
        ),
        TableRow(
            "adam-betas",
            "Adam trains slowly and unevenly: each step an old gradient's mean over a fresh "
            "gradient's size",
            "betas swapped: β1 (the momentum's decay) above β2 (the squared gradient's)",
            "betas=(β1, β2) with β1 the smaller, as (0.9, 0.999)",
        ),
        TableRow(
            "copies",
            "ensemble members agree exactly; their spread (the uncertainty) is zero",
            "the members are copies of one network (deepcopy) fed the same batches: one "
            "model trained several times",
            "initialise each member anew and give each its own data order",
        ),
        TableRow(
            "same-batch",
            "the loss falls to ~0 quickly, and evaluation does not follow",
            "every step trains on the same batch (a loader that yields one batch)",
            "iterate the loader (for x, y in loader), not next(iter(loader)) in the loop",
        ),
        TableRow(
            "target-in-input",
            "the loss falls to ~0 within a few steps and the model generates nothing useful",
            "the targets are fed to the model at the positions they are predicted at "
            "(teacher forcing without the shift)",
            "shift by one: feed tokens[:, :-1], predict tokens[:, 1:]",
        ),
        TableRow(
            "future-attended",
            "the loss falls far faster than it should, toward 0, and generation is garbage",
            "the attention's causal mask is missing or wrong: each position attends to later "
            "tokens, the one it is trained to predict among them",
            "is_causal=True, or a tril mask filled with -inf above the diagonal",
        ),
        TableRow(
            "self-normalised-term",
            "the policy never improves on the data it imitates; no error shows",
            "a loss term is divided by its own magnitude with that magnitude attached "
            "(TD3+BC's alpha / Q.abs().mean()): the ratio is scale-free and its gradient is 0",
            "detach the normaliser: alpha / Q.abs().mean().detach()",
        ),
        TableRow(
            "padding-in-loss",
            "the loss looks low and varies with how much each batch was padded",
            "the labels keep the pad token where the input was padding: the model is trained "
            "to predict padding",
            "labels = -100 (ignore_index) wherever the attention mask is 0",
        ),
        TableRow(
            "teacher-trained",
            "a self-distillation loss falls to its floor while the representation collapses",
            "the EMA teacher's forward is attached and it sits in the optimizer: the target "
            "is trained toward the prediction (no stop-gradient)",
            "teacher forward under torch.no_grad(), requires_grad_(False), out of the optimizer",
        ),
        TableRow(
            "ema-reversed",
            "a self-distillation or momentum-contrast run learns little: its targets never "
            "change and the model drifts back toward where it started",
            "the EMA update's arguments are swapped: the script writes the trained model from "
            "its frozen copy, and the copy never follows",
            "pass the trained model first and the EMA copy second to the momentum update",
        ),
        TableRow(
            "reference-trained",
            "a preference or KL-regularised loss falls fast while the reference anchors nothing",
            "the reference model (a copy of the policy) sits in the optimizer with its forward "
            "attached: the loss's log-ratio trains both sides",
            "reference forward under torch.no_grad(), requires_grad_(False), out of the optimizer",
        ),
        TableRow(
            "batch-size",
            "the batch is far larger or smaller than the gradient noise makes useful",
            "a batch far above the critical batch size averages away noise that was "
            "already small (samples wasted); far below it, each step follows noise "
            "(steps wasted, parallelism left unused)",
            "move the batch (micro-batches x accumulation x ranks) toward the critical "
            "batch size, retuning the learning rate with it",
        ),
        TableRow(
            "clip-scaled",
            "gradient clipping under GradScaler has no sensible threshold",
            "clip_grad_norm_ ran on gradients still multiplied by the loss scale",
            "scaler.unscale_(optimizer) before clip_grad_norm_",
        ),
        # `gradscope diff`: two models (or one under two settings) on the same batch (GS6xx)
        TableRow(
            "port",
            "a port (or a second setting) computes something else than the reference",
            "a different formula, constant, layout or precision in one module: an eps, an "
            "activation, a transposed weight, an attention scale, a residual, dropout, a dtype",
            "fix the first module whose output differs while its inputs agree, then diff again",
        ),
        # `gradscope diff a.jsonl b.jsonl`: two training runs (watch --log files), step by step
        TableRow(
            "runs",
            "two runs that should match part ways, or pass a loose parity check without training",
            "a changed setting (learning rate, seed, data order, a layer), a non-deterministic "
            "kernel, or one run not training at all",
            "compare what the two runs did differently at the first step where they part; check "
            "that each run's loss falls by itself",
        ),
    )
}
