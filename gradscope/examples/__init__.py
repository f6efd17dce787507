"""Built-in targets with known pathologies, runnable by name (`gradscope examples`).

The registry names factories by dotted path so that listing them (in
`--help`) does not import torch.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Example:
    name: str
    path: str
    """`module:function` inside gradscope.examples."""
    summary: str
    expect: str
    """The rule slugs this example triggers ("" for a healthy one)."""

    @property
    def factory(self) -> Callable[[], Any]:
        module, _, func = self.path.partition(":")
        return getattr(importlib.import_module(f"gradscope.examples.{module}"), func)


EXAMPLES: dict[str, Example] = {
    e.name: e
    for e in (
        Example("healthy-mlp", "models:healthy_mlp", "3-layer ReLU MLP classifier", ""),
        Example(
            "unused-submodule",
            "models:unused_submodule",
            "an auxiliary head that forward never calls",
            "none-grad",
        ),
        Example(
            "frozen-layers",
            "models:frozen_layers",
            "a frozen backbone under a trainable head",
            "frozen",
        ),
        Example(
            "vanishing-sigmoid", "models:vanishing_sigmoid", "16 Linear+Sigmoid layers", "vanishing"
        ),
        Example(
            "exploding-deep",
            "models:exploding_deep",
            "24 linear layers initialised with gain 2",
            "exploding",
        ),
        Example(
            "nan-loss",
            "models:nan_loss",
            "log of a masked activation: the loss is -inf, the grads NaN",
            "non-finite-loss, non-finite-grad",
        ),
        Example(
            "detached-middle",
            "models:detached_middle",
            "encoder output .detach()ed before the decoder",
            "none-grad",
        ),
        Example(
            "dead-relu",
            "models:dead_relu",
            "a ReLU layer whose bias keeps every unit off",
            "zero-grad",
        ),
        Example(
            "retained-graph",
            "models:retained_graph",
            "gathers its live outputs on the module: a graph kept every step",
            "graph-retained",
        ),
        Example(
            "tiny-transformer",
            "transformer:tiny_transformer",
            "2-layer GPT-style decoder returning an output with .loss",
            "",
        ),
        Example(
            "deep-transformer",
            "transformer:deep_transformer",
            "12-layer GPT-style decoder: a ~500-op graph for `gradscope graph`",
            "",
        ),
        Example("cnn", "models:cnn", "Conv-BatchNorm-ReLU(inplace) image classifier", ""),
        Example("rnn", "models:rnn", "2-layer LSTM sequence classifier", ""),
    )
}
