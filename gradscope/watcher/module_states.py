"""The state a module keeps between forwards (a spiking neuron's membrane, a stateful
layer's hidden value): a tensor held on the module outside its parameters and persistent
buffers (a plain attribute, a non-persistent buffer as snnTorch's `mem`, spikingjelly's
`_memories`). Read only after a backward failed on a graph an earlier step built: a state
whose graph, as the failing step left it, still reaches a node built before the step was
carried from the previous batch, not reset. No per-step cost."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import torch


def _held(module: torch.nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """The tensors `module` keeps as state: plain attributes, non-persistent buffers and
    the entries of a `_memories` dict."""
    for name, value in vars(module).items():
        if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
            yield name, value
    for name in getattr(module, "_non_persistent_buffers_set", ()):
        value = module._buffers.get(name)
        if isinstance(value, torch.Tensor):
            yield name, value
    memories = vars(module).get("_memories")
    if isinstance(memories, dict):
        for name, value in memories.items():
            if isinstance(value, torch.Tensor):
                yield name, value


def carrying_states(
    models: Sequence[torch.nn.Module], mark: int, reaches_older: Any
) -> tuple[str, ...]:
    """The names of the models' module states whose graph reaches a node numbered at or
    below `mark` (built before the failing step): `reaches_older(node, mark)`."""
    found: list[str] = []
    for model in models:
        for path, module in model.named_modules():
            for name, value in _held(module):
                node = value.grad_fn
                label = f"{path}.{name}" if path else f"{type(module).__name__}.{name}"
                if node is not None and label not in found and reaches_older(node, mark):
                    found.append(label)
    return tuple(found)
