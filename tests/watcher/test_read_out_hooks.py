"""A forward hook that only marks a layer's output (transformers' enable_input_require_grads,
modeling_utils.py: `output.requires_grad_(True)` on the input embeddings, installed by trl's
SFT/DPO/GRPO/Reward trainers and peft) reads nothing: the layers after it are no wrapper's
unread tail. A hook that reads the output (BYOL's representation) still marks them."""

from __future__ import annotations

from torch import nn

from gradscope.watcher.discover import read_out_layers


def _model() -> nn.Module:
    return nn.Sequential(nn.Embedding(8, 4), nn.Linear(4, 4), nn.Linear(4, 2))


def test_a_hook_that_only_marks_the_embeddings_output_reads_nothing():
    def make_inputs_require_grads(module, inputs, output):
        output.requires_grad_(True)

    model = _model()
    model[0].register_forward_hook(make_inputs_require_grads)
    assert read_out_layers([model]) == {}


def test_a_hook_that_reads_the_output_still_marks_the_layers_after_it():
    seen = []
    model = _model()
    model[0].register_forward_hook(lambda module, inputs, output: seen.append(output))
    assert read_out_layers([model])[(0, "1.weight")] == "0"
