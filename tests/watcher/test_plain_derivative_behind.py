"""What a torch.autograd.grad call without create_graph takes part in (PlainDerivatives):
EnCodec's loss balancer differentiates each loss against the decoder's output, then
backpropagates the weighted sum itself by `output.backward(grad)`. The decoder behind
that output is reached by the later backward, not by the call, so a decoder that still
gets nothing (the backward called on a detached copy) is not told it took part in a
derivative taken without create_graph. A bilevel loss's hyper-parameter, beside the
variables, still is."""

from __future__ import annotations

import torch
from torch import nn

from gradscope.watcher.plain_derivatives import PlainDerivatives


def test_the_weights_behind_a_variable_with_a_graph_are_not_noted():
    decoder, scale = nn.Linear(4, 4), nn.Parameter(torch.ones(()))
    output = decoder(torch.randn(2, 4))
    loss = (scale * output).pow(2).mean()
    seen = PlainDerivatives()
    seen.note(loss, [output])
    assert not seen.holds(decoder.weight) and not seen.holds(decoder.bias)
    assert seen.holds(scale)


def test_a_hyper_parameter_beside_leaf_variables_is_noted():
    weights, decay = nn.Parameter(torch.randn(4)), nn.Parameter(torch.tensor(0.1))
    inner = weights.pow(2).sum() + decay * weights.abs().sum()
    seen = PlainDerivatives()
    seen.note(inner, [weights])
    assert seen.holds(decay) and not seen.holds(weights)
