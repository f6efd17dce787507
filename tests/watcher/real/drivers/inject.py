"""`python inject.py BUG[=ARG] SCRIPT [ARGS...]`: run a vendored training script, unmodified,
as `python SCRIPT ARGS` would, with one seeded bug monkeypatched in from outside.

Each bug below is what a user gets wrong in their own loop, injected without editing the
real code; every patch is undone when the script ends (the tests run in one process).
The generic bugs at the end apply to any script; the others to one project.
"""

from __future__ import annotations

import contextlib
import os
import runpy
import sys
import types
import weakref
from collections.abc import Callable, Iterator
from unittest import mock

import torch
from torch.nn import functional as F
from torch.optim.optimizer import register_optimizer_step_post_hook

FREEZE_AFTER = 40
"""freeze_midway: transformer.h.0 stops training after this optimizer step."""
LOG0_STEP = 30
"""log0: the optimizer step whose loss takes log(0)."""


class StepCount:
    """Optimizer steps so far, counted by a global step post-hook of the driver's own."""

    def __init__(self, stack: contextlib.ExitStack) -> None:
        self.n = 0
        handle = register_optimizer_step_post_hook(self._count)
        stack.callback(handle.remove)

    def _count(self, *_: object) -> None:
        self.n += 1


def _wrap_init(stack: contextlib.ExitStack, cls: type, after: Callable[[object], None]) -> None:
    original = cls.__init__

    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        after(self)

    stack.enter_context(mock.patch.object(cls, "__init__", __init__))


# -- nanoGPT ---------------------------------------------------------------------------------
def nanogpt_no_zero_grad(stack: contextlib.ExitStack) -> None:
    """optimizer.zero_grad(set_to_none=True) forgotten: AdamW's zero_grad does nothing."""
    stack.enter_context(mock.patch.object(torch.optim.AdamW, "zero_grad", lambda *a, **k: None))


DROPPED = "transformer.h.1.mlp.c_proj.weight"


def nanogpt_drop_param(stack: contextlib.ExitStack) -> None:
    """configure_optimizers leaves one weight matrix out of every param group."""
    import model

    original = model.GPT.configure_optimizers

    def configure_optimizers(self, *args, **kwargs):
        optimizer = original(self, *args, **kwargs)
        dropped = dict(self.named_parameters())[DROPPED]
        for group in optimizer.param_groups:
            group["params"] = [p for p in group["params"] if p is not dropped]
        return optimizer

    stack.enter_context(mock.patch.object(model.GPT, "configure_optimizers", configure_optimizers))


def nanogpt_freeze_midway(stack: contextlib.ExitStack) -> None:
    """After step FREEZE_AFTER the first block is frozen (requires_grad_(False)) while
    AdamW keeps it: from the next step on it gets no gradient and stops learning."""
    import model

    models: list = []
    _wrap_init(stack, model.GPT, models.append)

    steps = StepCount(stack)

    def freeze(*_: object) -> None:
        if steps.n == FREEZE_AFTER:
            models[-1].transformer.h[0].requires_grad_(False)

    handle = register_optimizer_step_post_hook(freeze)  # runs after StepCount's
    stack.callback(handle.remove)


DETACHED = "transformer.h.1.mlp"


def nanogpt_detach(stack: contextlib.ExitStack) -> None:
    """The second block's MLP output is .detach()ed in the residual: its ln_2 and MLP
    weights get no gradient, the rest of the model trains."""
    import model

    def tag(gpt) -> None:
        gpt.transformer.h[1].mlp.gs_detach = True

    _wrap_init(stack, model.GPT, tag)
    original = model.MLP.forward

    def forward(self, x):
        out = original(self, x)
        return out.detach() if getattr(self, "gs_detach", False) else out

    stack.enter_context(mock.patch.object(model.MLP, "forward", forward))


def nanogpt_unshifted(stack: contextlib.ExitStack) -> None:
    """Teacher forcing without the shift: the model is trained to predict the batch it is
    fed (get_batch's y = x where y = data[i + 1 : i + 1 + block_size] is meant)."""
    import model

    original = model.GPT.forward

    def forward(self, idx, targets=None):
        return original(self, idx, None if targets is None else idx)

    stack.enter_context(mock.patch.object(model.GPT, "forward", forward))


def nanogpt_unmasked(stack: contextlib.ExitStack) -> None:
    """The causal mask left out: nanoGPT's attention calls scaled_dot_product_attention
    without is_causal=True, so each position attends to the token it predicts."""
    original = F.scaled_dot_product_attention

    def attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, **kw: object):
        return original(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, **kw)

    stack.enter_context(mock.patch.object(F, "scaled_dot_product_attention", attention))


def nanogpt_log0(stack: contextlib.ExitStack) -> None:
    """The loss is written as log(softmax(logits)); at step LOG0_STEP the logits are large
    enough (×1e4) that softmax underflows to exactly 0 and log(0) = -inf."""
    import model

    steps = StepCount(stack)

    def cross_entropy(logits, targets, ignore_index=-100, **_: object):
        if steps.n + 1 == LOG0_STEP and torch.is_grad_enabled():
            logits = logits * 1e4
        logp = torch.log(torch.softmax(logits, dim=-1))
        return F.nll_loss(logp, targets, ignore_index=ignore_index)

    proxy = types.SimpleNamespace(**{k: getattr(F, k) for k in dir(F) if not k.startswith("__")})
    proxy.cross_entropy = cross_entropy
    stack.enter_context(mock.patch.object(model, "F", proxy))


def nanogpt_cpu_scaler(stack: contextlib.ExitStack) -> None:
    """Port nanoGPT's `torch.cuda.amp.GradScaler(enabled=dtype == 'float16')` to the CPU
    (the CUDA one disables itself without a GPU): an enabled `torch.amp.GradScaler("cpu")`."""

    def scaler(enabled: bool = True, **kwargs):
        return torch.amp.GradScaler("cpu", enabled=enabled, **kwargs)

    stack.enter_context(mock.patch.object(torch.cuda.amp, "GradScaler", scaler))


def nanogpt_clip_before_unscale(stack: contextlib.ExitStack) -> None:
    """With the CPU scaler: the script's own `scaler.unscale_(optimizer)` is lost, so
    clip_grad_norm_ clips the still-scaled gradients (scaler.step unscales them after)."""
    nanogpt_cpu_scaler(stack)
    original = torch.amp.GradScaler.unscale_

    def unscale_(self, optimizer):
        if sys._getframe(1).f_code.co_name == "step":  # GradScaler.step's own call
            return original(self, optimizer)
        return None

    stack.enter_context(mock.patch.object(torch.amp.GradScaler, "unscale_", unscale_))


# -- pytorch/examples dcgan ------------------------------------------------------------------
def dcgan_no_zero_grad_d(stack: contextlib.ExitStack) -> None:
    """netD.zero_grad() forgotten (netG.zero_grad() kept)."""
    original = torch.nn.Module.zero_grad

    def zero_grad(self, *args, **kwargs):
        if type(self).__name__ == "Discriminator":
            return None
        return original(self, *args, **kwargs)

    stack.enter_context(mock.patch.object(torch.nn.Module, "zero_grad", zero_grad))


# -- pytorch/examples word_language_model ------------------------------------------------------
SKIPPED = "decoder.bias"


def wlm_skip_param(stack: contextlib.ExitStack) -> None:
    """The hand-written update loop (and the clip before it) misses decoder.bias:
    `model.parameters()` as train() sees it leaves it out; zero_grad still resets it."""
    import model

    original = model.RNNModel.parameters

    def parameters(self, recurse: bool = True):
        params = original(self, recurse)
        if sys._getframe(1).f_code.co_name != "train":
            return params
        skipped = dict(self.named_parameters())[SKIPPED]
        return (p for p in params if p is not skipped)

    stack.enter_context(mock.patch.object(model.RNNModel, "parameters", parameters))


def wlm_unmasked(stack: contextlib.ExitStack) -> None:
    """The Transformer language model run without its causal mask (`has_mask=False`): an
    nn.TransformerEncoder used as a decoder sees every later word."""
    import model

    original = model.TransformerModel.forward

    def forward(self, src, has_mask=True):
        return original(self, src, has_mask=False)

    stack.enter_context(mock.patch.object(model.TransformerModel, "forward", forward))


# -- generic: any script ---------------------------------------------------------------------
NEGATED = ("cross_entropy", "nll_loss", "binary_cross_entropy")
"""loss_negated: the torch.nn.functional losses that return their negation."""


def loss_negated(stack: contextlib.ExitStack) -> None:
    """The loss written with its sign flipped, `loss = -F.cross_entropy(...)`: the losses in
    NEGATED return their negation wherever the script calls them (nn.CrossEntropyLoss and
    nn.NLLLoss call them too). The optimizer then climbs the loss. In vae only the
    reconstruction term (binary_cross_entropy) flips; its KL term, written by hand, not."""
    for name in NEGATED:
        original = getattr(F, name)

        def negated(*args, _original=original, **kwargs):
            return -_original(*args, **kwargs)

        stack.enter_context(mock.patch.object(F, name, negated))


def no_zero_grad(stack: contextlib.ExitStack) -> None:
    """Every `zero_grad()` forgotten, the optimizer's and the model's: each backward adds to
    gradients nobody cleared (also under a hand-written update)."""
    for cls in (torch.optim.Optimizer, torch.nn.Module):
        stack.enter_context(mock.patch.object(cls, "zero_grad", lambda *a, **k: None))


def zero_grad_before_step(stack: contextlib.ExitStack) -> None:
    """`loss.backward(); optimizer.zero_grad(); optimizer.step()`: right after each backward
    every optimizer the script built clears its gradients (to None, zero_grad's default),
    so each step() finds no gradient and applies nothing."""
    optimizers: weakref.WeakSet = weakref.WeakSet()
    _wrap_init(stack, torch.optim.Optimizer, optimizers.add)
    original = torch.Tensor.backward

    def backward(self, *args, **kwargs):
        original(self, *args, **kwargs)
        for optimizer in list(optimizers):
            optimizer.zero_grad()

    stack.enter_context(mock.patch.object(torch.Tensor, "backward", backward))


def freeze_in_optimizer(stack: contextlib.ExitStack, path: str) -> None:
    """`model.<path>.requires_grad_(False)` right after the optimizer was built over all the
    model's parameters: the layer stays in the optimizer's param groups, its `.grad` is None
    at every step and it never moves (often deliberate: fine-tuning with a frozen part)."""

    def freeze(optimizer) -> None:
        params = {id(p) for group in optimizer.param_groups for p in group["params"]}
        _model_owning(params).get_submodule(path).requires_grad_(False)

    _wrap_init(stack, torch.optim.Optimizer, freeze)


def _model_owning(params: set[int]) -> torch.nn.Module:
    """The module, in a caller's frame, whose parameters are all of the optimizer's (the
    script's `model`, or `self` in a `configure_optimizers`)."""
    frame = sys._getframe(1)
    while frame is not None:
        for value in frame.f_locals.values():
            if isinstance(value, torch.nn.Module):
                if params <= {id(p) for p in value.parameters()}:
                    return value
        frame = frame.f_back
    raise RuntimeError("freeze_in_optimizer: no model owns the optimizer's parameters")


def lr_x100(stack: contextlib.ExitStack) -> None:
    """The learning rate written 100x too large where the script hard-codes it (vae's
    `optim.Adam(model.parameters(), lr=1e-3)`): every optimizer's default lr times 100."""
    original = torch.optim.Optimizer.__init__

    def __init__(self, params, defaults):
        original(self, params, {**defaults, "lr": defaults["lr"] * 100})

    stack.enter_context(mock.patch.object(torch.optim.Optimizer, "__init__", __init__))


def train_ignored(stack: contextlib.ExitStack) -> None:
    """`model.train()` forgotten after an evaluation: every `train(True)` does nothing, so
    a model the script once switched to eval mode (its evaluation's `model.eval()`) stays
    there through the training steps that follow."""
    original = torch.nn.Module.train

    def train(self, mode=True):
        return self if mode else original(self, mode)

    stack.enter_context(mock.patch.object(torch.nn.Module, "train", train))


def adam_eps(stack: contextlib.ExitStack, value: str) -> None:
    """Adam's eps written far too large where the script builds its optimizer (`eps=0.1`):
    every optimizer with betas and an eps is built with eps=`value`."""
    original = torch.optim.Optimizer.__init__

    def __init__(self, params, defaults):
        if "eps" in defaults and "betas" in defaults:
            defaults = {**defaults, "eps": float(value)}
        original(self, params, defaults)

    stack.enter_context(mock.patch.object(torch.optim.Optimizer, "__init__", __init__))


def loader_one_batch(stack: contextlib.ExitStack) -> None:
    """A loader that yields one batch: each epoch's iterator gives the loader's first batch
    every time, as `x, y = next(iter(loader))` inside the loop does."""
    original = torch.utils.data.DataLoader.__iter__

    def __iter__(self):
        first = next(iter(original(self)))
        return iter([first] * len(self))

    stack.enter_context(mock.patch.object(torch.utils.data.DataLoader, "__iter__", __iter__))


BUGS: dict[str, Callable[..., None]] = {
    f.__name__: f
    for f in (
        nanogpt_no_zero_grad,
        nanogpt_drop_param,
        nanogpt_freeze_midway,
        nanogpt_detach,
        nanogpt_unshifted,
        nanogpt_unmasked,
        nanogpt_log0,
        nanogpt_cpu_scaler,
        nanogpt_clip_before_unscale,
        dcgan_no_zero_grad_d,
        wlm_skip_param,
        wlm_unmasked,
        loss_negated,
        no_zero_grad,
        zero_grad_before_step,
        freeze_in_optimizer,
        lr_x100,
        train_ignored,
        adam_eps,
        loader_one_batch,
    )
}


@contextlib.contextmanager
def _script_argv(script: str, argv: list[str]) -> Iterator[None]:
    old_argv, old_path = sys.argv, list(sys.path)
    sys.argv = [script, *argv]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        yield
    finally:
        sys.argv, sys.path[:] = old_argv, old_path


def main(argv: list[str]) -> None:
    bug, script, *rest = argv
    name, _, arg = bug.partition("=")
    with _script_argv(script, rest), contextlib.ExitStack() as stack:
        BUGS[name](stack, *([arg] if arg else []))
        runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
