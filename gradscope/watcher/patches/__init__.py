"""The interception: one patch per torch entry point, all installed by `intercepting`
and all removed when it ends (also on an exception, Ctrl-C or --steps reached).

- optimizer_step  torch's global step pre/post hooks (closures included)
- backward        Tensor.backward, torch.autograd.backward
- autograd_grad   torch.autograd.grad (the leaves the script differentiates against)
- zero_grad       Optimizer.zero_grad, Module.zero_grad
- clip            clip_grad_norm_, get_total_norm, clip_grads_with_norm_
- grad_scaler     GradScaler.scale, GradScaler.step
- pickling        Module.__getstate__ and RNNBase's (no noise-scale hook in a pickled model)
- scripting       TorchScript making a ScriptModule (torch.jit.script, trace): none of
                  gradscope's forward hooks compiled into it
- scheduler       LRScheduler.step and its subclasses' own (how often the lr schedule steps)
- registration    a module registering a parameter or submodule (torch's global hooks)
- warning_site    warnings.warn: torch's warnings inside a patch keep the user's line
- module_train    Module.train (where the script switched a model to eval)
- logits          scaled_dot_product_attention, softmax (F's, torch's, the tensor
                  method), cross_entropy, log_softmax (the method) and nll_loss (their
                  logits on a sampled step: logit_probe.py)

From the first step on, the noise scale (noise_scale.py) adds a tensor hook on each
tracked parameter and a forward pre-hook on each model found; they go with the rest.
Nothing here reads a value back to the host: see recorder.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch.nn.utils as utils
import torch.nn.utils.clip_grad as clip_grad

from gradscope.watcher.patches.autograd_grad import AutogradGrad
from gradscope.watcher.patches.backward import AutogradBackward, TensorBackward
from gradscope.watcher.patches.clip import ClipGradNorm, ClipWithNorm, TotalNorm
from gradscope.watcher.patches.dynamo_first import import_dynamo_first
from gradscope.watcher.patches.grad_scaler import Scale, ScalerStep
from gradscope.watcher.patches.logits import (
    Attention,
    BoundNames,
    CrossEntropy,
    NllLoss,
    Softmax,
    TensorLogSoftmax,
    TensorSoftmax,
    TorchSoftmax,
)
from gradscope.watcher.patches.module_train import ModuleTrain
from gradscope.watcher.patches.optimizer_step import OptimizerStep
from gradscope.watcher.patches.pickling import OWNERS, ModuleGetstate
from gradscope.watcher.patches.register_hook import TensorRegisterHook
from gradscope.watcher.patches.registration import Registration
from gradscope.watcher.patches.scheduler import scheduler_patches
from gradscope.watcher.patches.scripting import ScriptModuleMade
from gradscope.watcher.patches.warning_site import WarningSite
from gradscope.watcher.patches.zero_grad import ModuleZeroGrad, OptimizerZeroGrad
from gradscope.watcher.state import WatchState


def every_patch(state: WatchState) -> list[Any]:
    """Each torch entry point's patch, in the order they are installed."""
    logits = [Attention(state), Softmax(state), CrossEntropy(state), NllLoss(state)]
    return [
        WarningSite(state),
        OptimizerStep(state),
        TensorBackward(state),
        AutogradBackward(state),
        AutogradGrad(state),
        TensorRegisterHook(state),
        OptimizerZeroGrad(state),
        ModuleZeroGrad(state),
        *(ModuleGetstate(state, owner) for owner in OWNERS),
        ScriptModuleMade(state),
        ModuleTrain(state),
        ClipGradNorm(state, utils),
        ClipGradNorm(state, clip_grad),
        TotalNorm(state, utils),
        ClipWithNorm(state, utils),
        Scale(state),
        ScalerStep(state),
        *scheduler_patches(state),
        Registration(state),
        *logits,
        TorchSoftmax(state),
        TensorSoftmax(state),
        TensorLogSoftmax(state),
        BoundNames(logits),
    ]


@contextmanager
def intercepting(state: WatchState) -> Iterator[WatchState]:
    """Every patch installed for the block; a thread still inside one when it ends
    records nothing more."""
    installed = []
    import_dynamo_first()
    try:
        for patch in every_patch(state):
            patch.install()
            installed.append(patch)
        yield state
    finally:
        with state.threads.lock:
            state.off = True
        state.noise.remove()
        state.eval_passes.remove()
        while installed:
            installed.pop().remove()
