"""A reentrant `torch.utils.checkpoint` (use_reentrant=True) called with no
input that requires grad: its outputs come back without a graph, so the parameters inside
it get no gradient, and a rollout checkpointed step by step from the data hands the loss no
graph at all. torch says so only in a warning; the warning patch passes each message here,
and the step it came in is kept for a backward that fails on a loss without a graph. An
evaluation checkpointed so under torch.no_grad() in the same step as another cut cannot be
told apart (grad mode is off inside every checkpoint's forward)."""

from __future__ import annotations

from typing import Any

from gradscope.watcher.state import WatchState

TORCH_SAYS = "None of the inputs have requires_grad=True"
"""The start of the warning torch.utils.checkpoint gives for such a call."""


def note(state: WatchState, message: Any) -> None:
    """Keep the step of a checkpoint's warning. torch gives it inside the checkpoint's own
    autograd.Function forward, where grad mode is always off: whether the call was a
    training one is read at the failing backward instead (grad mode on there, same step)."""
    text = message.args[0] if isinstance(message, Warning) and message.args else message
    if isinstance(text, str) and text.startswith(TORCH_SAYS):
        state.inputs_unreached_at = state.steps + 1
