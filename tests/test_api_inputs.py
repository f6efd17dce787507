"""The Python API: arguments of the wrong kind are one clear GradscopeError line, exit 2 in the
CLI, never a raw AttributeError from inside a pass."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import gradscope
from gradscope.cli import app
from gradscope.config import Settings
from gradscope.errors import ConfigError, GradscopeError, TargetError, UserCodeError

X = torch.randn(2, 3)


def _inspect(**kwargs):
    args = {"model": nn.Linear(3, 1), "batch": X, **kwargs}
    return gradscope.inspect(args.pop("model"), args.pop("batch"), **args)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (
            {"model": "notamodule"},
            TargetError,
            "model must be a torch.nn.Module, not the str 'notamodule'",
        ),
        ({"model": None}, TargetError, "model must be a torch.nn.Module, not None"),
        ({"model": nn.Linear}, TargetError, "not the class Linear: create an instance first"),
        ({"model": lambda x: x.sum()}, TargetError, "not a function: wrap it in an nn.Module"),
        ({"loss_fn": 3}, TargetError, "loss_fn must be a callable (output -> loss), not the int 3"),
        (
            {"grad_outputs": [1.0]},
            TargetError,
            "grad_outputs must be a tensor shaped like the output, not a list",
        ),
        (
            {"settings": {"fail-on": "error"}},
            ConfigError,
            "settings must be a gradscope.config.Settings",
        ),
        ({"label": 7}, TargetError, "label must be a string, not the int 7"),
        ({"batch": None}, UserCodeError, "forward pass on None as the batch raised TypeError"),
        (
            {"batch": "abc"},
            UserCodeError,
            "forward pass on the str 'abc' as the batch raised TypeError",
        ),
        ({"batch": np.ones((2, 3))}, UserCodeError, "forward pass on a numpy.ndarray as the batch"),
        (
            {"batch": torch.randn(2, 5)},
            UserCodeError,
            "forward pass raised RuntimeError: mat1 and mat2",
        ),
        ({"batch": {"foo": X}}, UserCodeError, "unexpected keyword argument 'foo'"),
    ],
)
def test_wrong_kinds_of_argument_are_one_clear_line(kwargs, error, message):
    with pytest.raises(error) as caught:
        _inspect(**kwargs)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: gradscope.inspect_target(None), "the target must be a non-empty string"),
        (lambda: gradscope.inspect_target(""), "the target must be a non-empty string"),
        (
            lambda: gradscope.inspect_script(3),
            "the script must be a path to a .py file, not the int 3",
        ),
        (lambda: gradscope.inspect_script("t.py", "--lr 1"), "argv must be a list of strings"),
        (lambda: gradscope.inspect_script("t.py", ["--lr", 1]), "argv must be a list of strings"),
    ],
)
def test_wrong_targets_and_scripts_are_one_clear_line(call, message):
    with pytest.raises(TargetError, match="^" + message.replace(".", r"\.")):
        call()


def test_the_right_kinds_still_work():
    report = _inspect(settings=Settings(), label="mine", loss_fn=lambda out: out.pow(2).mean())
    assert report.target == "mine" and report.findings == []
    report = _inspect(grad_outputs=torch.ones(2, 1))
    assert report.stats.params[0].has_grad


def test_every_api_error_is_a_gradscope_error_the_cli_maps_to_exit_2(runner, tmp_path):
    assert issubclass(TargetError, GradscopeError) and issubclass(ConfigError, GradscopeError)
    (tmp_path / "bad.py").write_text(
        "import torch\ndef gradscope_target():\n    return 'notamodule', torch.ones(2)\n"
    )
    result = runner.invoke(app, ["inspect", f"{tmp_path / 'bad.py'}"])
    assert result.exit_code == 2
    assert "not a torch.nn.Module" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_a_factory_may_return_a_huggingface_batch_encoding(tmp_path):
    """Tokenizers return a BatchEncoding (a Mapping, not a dict): it is spread as keywords."""
    (tmp_path / "bert_target.py").write_text(
        "import torch\n"
        "import transformers as hf\n"
        "def build():\n"
        "    cfg = hf.BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,\n"
        "                        intermediate_size=64, vocab_size=100)\n"
        "    ids = torch.randint(0, 100, (2, 8), generator=torch.Generator().manual_seed(0))\n"
        "    batch = hf.BatchEncoding({'input_ids': ids, 'labels': torch.tensor([0, 1])})\n"
        "    return hf.BertForSequenceClassification(cfg), batch\n"
    )
    report = gradscope.inspect_target(f"{tmp_path / 'bert_target.py'}:build")
    assert report.stats.loss_value is not None and report.stats.loss_value > 0
    assert any(p.has_grad for p in report.stats.params)
